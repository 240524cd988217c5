"""Write tests/fixtures/spm_ids.json: what Python's sentencepiece gives for a set of edge cases, for the JS tokenizer's tests.

    python tools/make_spm_fixture.py

The fixture is generated: do not edit it by hand, run this again (e.g. after the shipped model changes; the tests check its
sha256). It holds, for pretrained/multi30k-de-en/spm.model: the special ids; for each sentence below its normalized form, its
ids (plain, and with BOS and EOS), pieces and decoded text; the text of id lists chosen to exercise decoding (byte pieces that make valid, truncated and
invalid UTF-8, control and unknown ids) and of seeded random id lists; some piece <-> id lookups; and id lists that sp.decode
refuses. tests/js/spm.test.mjs checks docs_src/_static/live/spm.js against it, and tests/test_live_tokenizer.py runs the
sentences through every shipped model.
"""
from __future__ import annotations
import hashlib, json, random
from pathlib import Path
import sentencepiece as spm

REPO = Path(__file__).resolve().parents[1]
MODEL = "pretrained/multi30k-de-en/spm.model"
OUT = REPO / "tests/fixtures/spm_ids.json"

SENTENCES = [
    "", " ", "   ", "\t", "a", "Ein Hund.",
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",  # Multi30k train.de, line 1
    "Two young, White males are outside near many bushes.",  # train.en, line 1
    "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen",  # val.de, line 1 (no final full stop)
    "Ärger über Öl, Übel: Straße, Fuß, groß, GROẞ, daß.",  # umlauts, ß and capital ẞ
    "Café, naïve, façade, señor, Ångström, Øre, œuvre, Dvořák, Łódź.",  # accents
    "e\u0301 (e + combining acute) vs é (precomposed)",
    "1 2 3 10 100 2016 3.14 1,000,000 0.5% 24/7 +49 (0)30-1234",
    "!?.,;:-—–'\"„“”‚‘’«»()[]{}<>/\\|@#$%^&*_~`",
    "Ein  Mann   mit    vielen     Leerzeichen.",  # multiple spaces
    "  leading spaces", "trailing spaces   ", "   both   ",
    "tab\tbetween\twords", "\tleading tab", "trailing tab\t", "line\nbreak", "carriage\r\nreturn",
    "Emoji: 😀 👍🏽 👨‍👩‍👧 🇩🇪",  # surrogate pairs, skin tone, zero-width joiners, flags: byte fallback
    "中文 日本語 한국어",  # CJK
    "Привет, мир! Ёлка.",  # Cyrillic
    "Γειά σου κόσμε · עברית · العربية · हिन्दी",  # Greek, Hebrew, Arabic, Devanagari
    "Ｆｕｌｌ－ｗｉｄｔｈ　ＡＢＣ １２３",  # full-width letters, digits and space (NFKC would fold them: this model does not)
    "ﬁnden, ﬂach, ﬀ, ﬃ",  # ligatures
    "non\u00a0breaking\u00a0space and narrow\u202fno-break",
    "zero\u200bwidth\u200cjoiners\u200d and \ufeffBOM",
    "① ½ ² ™ № ℃ ㎏ Ⅻ",  # compatibility characters
    "Hund\u3000ideographic space",
    "tHe QuIcK bRoWn FoX",
    "A man in an orange hat starring at something.",  # test_2016_flickr.en, line 1
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",  # test_2016_flickr.de, line 1
    "Zwei Männer stehen am Herd und bereiten Essen zu.",
    "▁ already escaped ▁▁ space symbols",
    "<s> </s> <pad> <unk> <0x41> look like special pieces",
    "x" * 200,  # a long run of one character
    "Donaudampfschifffahrtsgesellschaftskapitänsmütze",  # a long compound
    "ÄÖÜäöüß" * 5,
    "\u0000nul and \u0007bell control characters",
    "\U0001d400\U0001d401 mathematical bold, \U00010348 gothic",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
    "Ein Hund läuft durch das Gras. ",
    "  Mehrere Sätze.  Mit Abständen!   Und Fragen?  ",
]

def decode_cases(sp: spm.SentencePieceProcessor, rng: random.Random) -> list[list[int]]:
    "Id lists for sp.decode: byte runs (valid, truncated, invalid UTF-8), control and unknown ids, leading ▁ pieces, random lists."
    b = lambda *xs: [sp.piece_to_id(f"<0x{x:02X}>") for x in xs]
    sp_ = sp.piece_to_id("▁")
    hund, ein = sp.piece_to_id("▁Hund"), sp.piece_to_id("▁Ein")
    cases = [[], [sp.bos_id()], [sp.eos_id(), sp.pad_id()], [sp.unk_id()], [sp.unk_id(), sp.unk_id()],
             b(0xC3, 0xA4), b(0xF0, 0x9F, 0x98, 0x80), b(0xE4, 0xB8), b(0x80), b(0xC3), b(0xFF, 0x41),
             b(0xED, 0xA0, 0x80), b(0xC0, 0xAF), b(0xEF, 0xBF, 0xBD), b(0xF4, 0x90, 0x80, 0x80),
             [sp_], [sp_, sp_, hund], [sp.bos_id(), hund, sp.eos_id()], [sp.bos_id(), sp_, hund],
             b(0x20) + [hund], b(0x41) + [hund], [hund, *b(0xC3, 0xA4), ein], [*b(0xC3), sp.eos_id(), *b(0xA4)],
             [sp.unk_id(), hund], [sp.pad_id(), sp_, hund, sp.unk_id(), ein]]
    for _ in range(30):
        cases.append([rng.choice([rng.randrange(sp.vocab_size()), rng.randrange(4, 260), rng.randrange(4), sp_])
                      for _ in range(rng.randint(1, 10))])
    return cases

def main():
    path = REPO / MODEL
    sp = spm.SentencePieceProcessor(model_file=str(path))
    rng = random.Random(0)
    lookups = ["<pad>", "<s>", "</s>", "<unk>", "<0x00>", "<0xFF>", "▁", "▁Hund", "ein", "not a piece", "▁Hund▁"]
    bad_ids = [[sp.vocab_size()], [-1], [5, sp.vocab_size() + 10]]
    for ids in bad_ids:  # the fixture says these are refused only if Python refuses them
        try: sp.decode(ids)
        except IndexError: pass
        else: raise SystemExit(f"sp.decode({ids}) did not raise")
    fixture = dict(
        generated_by="tools/make_spm_fixture.py (generated: do not edit, run it again)",
        sentencepiece=spm.__version__, model=MODEL, model_sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        vocab_size=sp.vocab_size(), unk_id=sp.unk_id(), bos_id=sp.bos_id(), eos_id=sp.eos_id(), pad_id=sp.pad_id(),
        encode=[dict(text=s, normalized=sp.normalize(s), ids=sp.encode(s), ids_bos_eos=sp.encode(s, add_bos=True, add_eos=True),
                     pieces=sp.encode(s, out_type=str), decoded=sp.decode(sp.encode(s))) for s in SENTENCES],
        decode=[dict(ids=ids, text=sp.decode(ids)) for ids in decode_cases(sp, rng)],
        piece_to_id={p: sp.piece_to_id(p) for p in lookups},
        id_to_piece={str(i): sp.id_to_piece(i) for i in (0, 1, 2, 3, 4, 259, 260, 7897, 7898, sp.vocab_size() - 1)},
        decode_refused=bad_ids,
    )
    dump = lambda x: json.dumps(x, ensure_ascii=False)
    rows = [f"{dump(k)}: [\n" + ",\n".join(map(dump, v)) + "\n]" if isinstance(v, list) and v and isinstance(v[0], dict)
            else f"{dump(k)}: {dump(v)}" for k, v in fixture.items()]
    OUT.write_text("{\n" + ",\n".join(rows) + "\n}\n", encoding="utf-8")  # one case a line
    print(f"wrote {OUT.relative_to(REPO)}: {len(fixture['encode'])} sentences, {len(fixture['decode'])} id lists")

if __name__ == "__main__":
    main()
