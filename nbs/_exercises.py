"""Self-checking exercises for the book's pages (Parts I and II).

Not part of the package: a teaching aid that the notebooks import from their own folder. An exercise is three cells:

1. the reader's cell, visible: a function whose body is `raise NotImplementedError` until the reader writes it;
2. a hidden cell, `if use_reference(): from _solutions import NAME`: the reference solution, kept in nbs/_solutions.py so
   that a reader who opens the notebook sees the exercise and its check, not the answer;
3. the check cell, visible: `check("Exercise 1", lambda: ...)`, whose lambda asserts with messages a reader can act on.

A reader who runs the page sees "right", "not answered yet" or "not yet: <why>" and the page goes on running. Under
`nbdev_test` (which sets `IN_TEST`), the hidden cell puts the reference solution in place and a failed check raises, so
a reference that no longer fits the code fails the test run; tests/test_exercises.py also gives each check a common wrong
answer, which it must refuse.
"""
import os

__all__ = ['use_reference', 'check', 'expect_close']


def use_reference() -> bool:
    "True under `nbdev_test`: the hidden cell then replaces the reader's answer by the reference solution."
    return bool(os.environ.get('IN_TEST'))


def check(title: str, test, hint: str = '') -> None:
    """Run `test()`, which asserts; print whether the answer is right. Under `nbdev_test` a wrong answer raises, so the
    reference solution is checked on every test run."""
    try:
        test()
    except NotImplementedError:
        msg = 'not answered yet: write the body of the function above, run its cell, then this one'
    except AssertionError as e:
        msg = f'not yet: {e}' + (f' (hint: {hint})' if hint else '')
    except Exception as e:  # a reader's code that crashes gets its error named, not a traceback
        msg = f'not yet: your code raised {type(e).__name__}: {e}' + (f' (hint: {hint})' if hint else '')
    else:
        print(f'✓ {title}: right')
        return   # nothing returned: the cell shows only the line above
    if use_reference(): raise AssertionError(f'{title}: the reference solution fails its own check: {msg}')
    print(f'✗ {title}: {msg}')


def expect_close(got, want, what: str, atol: float = 1e-5):
    "Assert that two tensors (or numbers) agree, with a message that names `what` and the shapes or values"
    import torch
    got_t, want_t = torch.as_tensor(got), torch.as_tensor(want)
    assert got_t.shape == want_t.shape, f'{what} has shape {tuple(got_t.shape)}, expected {tuple(want_t.shape)}'
    if got_t.dtype == torch.bool or want_t.dtype == torch.bool:
        assert got_t.dtype == want_t.dtype, f'{what} has dtype {got_t.dtype}, expected {want_t.dtype}'
        bad = (got_t != want_t).nonzero()
        assert len(bad) == 0, f'{what} differs at {len(bad)} positions, first at index {tuple(bad[0].tolist())}'
        return
    diff = (got_t.double() - want_t.double()).abs().max().item()
    assert diff <= atol, f'{what} is off by up to {diff:.3g} (tolerance {atol:g})'
