"""How far lower-precision products move the shipped Multi30k translator's translations, and what they buy, on one
thread (nbs/33_bench_suite.ipynb, *Decoding against CTranslate2*): test2016 translated greedy and with beam 4 with
every product in fp32 (as served), with the products of one part of the model (the encoder, the decoder layers, the
output projection) or of all three in bf16 (inputs, weights and results rounded to bf16, the sums in fp32), and with
torch's dynamic int8 quantization of every Linear; for each, the share of translations identical to fp32's, BLEU, and
the time of a search. Where oneDNN has no bf16 products (AVX2 alone), the bf16 variants are left out and said so.

    OMP_NUM_THREADS=1 python tools/decode_precision.py --out NAME.json

Every variant runs each step through the modules (`PackedDecoderStep` is a step of fp32 packed products), fp32 too,
so that the times compare the products. Writes results/bench/NAME.json (default decode-precision-<cpu>.json). Needs
quiet cores: nothing else should run beside it.
"""
import sys, time, warnings
from pathlib import Path
import torch
from torch import nn
from annotated_transformer.architecture.layers import PackedAttention, PackedDecoderStep, PackedLinear, can_pack
from annotated_transformer.bench.bench_suite import settings
from annotated_transformer.engine.loading import load_model
from annotated_transformer.translation.inference import bleu_scores
from live_parity import positive_int  # tools/, beside this file
from step_phases import write
from step_products import run_or_say, test2016, test2016_args

ROOT = Path(__file__).resolve().parents[1]
PARTS = {"encoder": ("encoder.",), "decoder": ("decoder.",), "generator": ("generator",),
         "all": ("encoder.", "decoder.", "generator")}  # bf16 variants: the products under these module names


def bf16_packs() -> bool:
    """Whether oneDNN here runs packed products in bf16: it needs avx512bw, avx512vl and avx512dq, or avx_ne_convert
    (not there on a CPU with AVX2 alone, nor with the libraries held to AVX2)."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return can_pack() and check is not None and bool(check())


class Bf16Linear(nn.Module):
    """A packed Linear's product in bf16, with oneDNN's packed kernel as `PackedLinear` runs it in fp32: input, weight
    and bias rounded to bf16, the sums in fp32, the result rounded to bf16 and returned in fp32."""
    def __init__(self, lin: PackedLinear):
        super().__init__()
        self.w = torch.ops.mkldnn._reorder_linear_weight(lin.weight.detach().bfloat16(), lin.rows)
        self.b = None if lin.bias is None else lin.bias.detach().bfloat16()

    def forward(self, x, relu: bool = False):  # `PackedFeedForward` asks its first product for the ReLU
        return torch.ops.mkldnn._linear_pointwise(x.bfloat16(), self.w, self.b, "relu" if relu else "none", [],
                                                  "").float()


def bf16_products(model: nn.Module, part: str) -> int:
    "Each packed product under `part`'s modules replaced by its bf16 product; returns how many."
    n = 0
    for name, mod in list(model.named_modules()):
        if isinstance(mod, PackedAttention) and name.startswith(PARTS[part]): mod.qkv = None  # three products again
        for child, c in list(mod.named_children()):
            full = f"{name}.{child}" if name else child
            if isinstance(c, PackedLinear) and full.startswith(PARTS[part]): setattr(mod, child, Bf16Linear(c)); n += 1
    return n


def int8_dynamic(model: nn.Module) -> nn.Module:
    "torch's dynamic int8 quantization of every Linear (weights int8, activations quantized at each product)."
    with warnings.catch_warnings():  # torch.ao.quantization warns that it moves to torchao; it is what this torch has
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)


def variant(name: str, checkpoint):
    "The served translator with the products of `name` (fp32, bf16-<part>, int8)."
    if name == "int8":
        tr = load_model(checkpoint, "at-translate", pack=False); tr.model = int8_dynamic(tr.model); return tr, 0
    tr = load_model(checkpoint, "at-translate")
    return tr, (bf16_products(tr.model, name.removeprefix("bf16-")) if name != "fp32" else 0)


def run(a) -> int:
    torch.set_num_threads(1)
    (f, src), (_, refs) = (test2016(a.data_dir, lang, a.sentences) for lang in ("de", "en"))
    if not src or len(src) != len(refs):
        raise ValueError(f"{f.parent}: {len(src)} German and {len(refs)} English test2016 lines; expected the same "
                         "number, at least one")
    step = PackedDecoderStep.usable
    PackedDecoderStep.usable = lambda self: False  # every variant through its modules
    try:
        out, res = {}, dict(settings=settings("cpu"), checkpoint=str(a.checkpoint), command=" ".join(sys.argv),
                            sentences=len(src), batch_size=32, variants={})
        bf16 = [f"bf16-{p}" for p in PARTS] if bf16_packs() else []
        res["bf16_left_out"] = not bf16
        if not bf16:
            print("decode_precision.py: this CPU's oneDNN has no bf16 products (avx512bw, avx512vl and avx512dq, or "
                  "avx_ne_convert): fp32 and int8 alone", file=sys.stderr)
        for name in ("fp32", *bf16, "int8"):
            tr, n = variant(name, a.checkpoint)
            rec = res["variants"][name] = dict(bf16_products=n)
            for search, k in (("greedy", 1), ("beam", 4)):
                tr.translate(src[:64], beam_size=k, batch_size=32)  # warm-up
                secs = []
                for _ in range(a.passes):
                    t = time.perf_counter(); got = tr.translate(src, beam_size=k, batch_size=32)
                    secs.append(time.perf_counter() - t)
                out[name, search] = got
                same = sum(x == y for x, y in zip(got, out["fp32", search])) / len(src)
                rec[search] = dict(seconds=min(secs), identical_to_fp32=same, bleu=bleu_scores(got, refs)["bleu"])
            print(f"{name:>14}: " + "; ".join(f"{s} {r['seconds']:.2f} s, {r['identical_to_fp32']:.1%} as fp32's, "
                                              f"BLEU {r['bleu']:.2f}" for s in ("greedy", "beam")
                                              for r in [rec[s]]), flush=True)
    finally: PackedDecoderStep.usable = step
    write(res, a.out or f"decode-precision-{res['settings']['cpu']['id'].replace(' ', '')}.json")
    return 0


def main(argv=None) -> int:
    ap = test2016_args(__doc__, "test2016 sentences translated")
    ap.add_argument("--passes", type=positive_int, default=2, help="timed searches of each variant (the fastest kept)")
    return run_or_say("decode_precision.py", run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
