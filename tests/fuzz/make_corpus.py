#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/).

Each seed is a hand-made case in the byte layout the target's comment
describes (value encodings: fuzz_input.hpp), so that the fuzzer starts from
inputs that reach the interesting paths instead of finding the layout itself.
Run it from anywhere after changing a layout:  tests/fuzz/make_corpus.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


# --- value<T>() encodings (fuzz_input.hpp) ---
SPECIAL = {name: i for i, name in enumerate(
    ["nan", "inf", "-inf", "-0", "0", "denorm", "-denorm", "min", "max", "lowest",
     "1", "-1", "eps", "0.5", "below1", "above1"])}


def special(name):
    return bytes([SPECIAL[name]])


def frac(k):  # k / 39, k in [0, 39]
    return bytes([24 + k])


def small(x):  # x in [-16, 8), a multiple of 1/8
    return bytes([128 + int(round(x * 8))])


def fixed(x):  # x in [-128, 128), a multiple of 1/256
    return bytes([192]) + struct.pack("<h", int(round(x * 256)))


def raw(x, double):
    return bytes([16]) + struct.pack("<d" if double else "<f", x)


def u8(v):
    return bytes([v & 0xFF])


def u16(v):
    return struct.pack("<H", v & 0xFFFF)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# --- fuzz_sampler ---
# order table indices of fuzz_sampler.cpp
DEFAULT, LLAMA, U_DEFAULT, U_LLAMA, TEMP_TOPK, TOPK, TOPP_MINP = 0, 1, 2, 3, 4, 5, 6
MINP_TEMP_TOPP, TEMP_U_TOPK, TOPK_U_TOPP = 7, 8, 9
NAMES = {"temperature": 0, "top_k": 1, "top_p": 2, "min_p": 3, "user": 4, "typical": 5, "": 6,
         "penalties": 7, "logit_bias": 8, "dry": 9, "bad_words": 10, "token_mask": 11, "no_repeat_ngram": 12,
         "top_n_sigma": 13, "epsilon": 14, "eta": 15, "xtc": 16, "tfs": 17, "p_less": 18, "top_h": 19,
         "top_k_top_p": 20}


def top_k(k):
    assert 0 <= k < 64
    return u8(64 + k)


def sampler_case(double=False, custom=False, ban=False, form=0, temp=small(1), k=top_k(0),
                 p=small(1), m=small(0), seed=0, order=b"\x00", custom_name=0, edits=(),
                 history=(), history_vocab=100, prompt_length=0, rows=(), processors=b""):
    out = u8(int(double) | int(custom) << 1 | int(ban) << 2 | form << 3)
    out += temp + k + p + m + u64(seed) + order + u8(custom_name)
    out += u8(len(edits)) + b"".join(u16(i) + v for i, v in edits)
    out += u8(len(history)) + u16(history_vocab - 1) + b"".join(u16(i) for i in history)
    out += u8(prompt_length)
    out += u8(len(rows) - 1) + b"".join(rows)
    return out + processors  # read_processors: after the rows


def row(vocab, kind=1, masked_eighths=0, seed=1, constant=b"", explicit=()):
    out = u16(vocab - 1) + u8(kind | masked_eighths << 2) + u32(seed)
    if kind == 0:
        out += constant
    out += u8(len(explicit)) + b"".join(u16(i) + v for i, v in explicit)
    return out


def penalties(repeat, presence, frequency, last_n, output=False):
    """fuzz::read_penalties: three values, last_n as an int8, the scope flag."""
    return repeat + presence + frequency + u8(last_n & 0xFF) + u8(int(output))


def sampler_processors(pen=None, bias=(), ngram=None, bad=(), allowed=None, banned=(), dry=None):
    """read_processors of fuzz_sampler.cpp: which, then each set one."""
    which = (1 if pen else 0) | (2 if bias else 0) | (4 if ngram is not None else 0) | (8 if bad else 0) | \
        (16 if allowed is not None else 0) | (32 if dry else 0)
    out = u8(which)
    if pen:
        out += pen
    if bias:
        out += u8(len(bias)) + b"".join(u16(i) + u8(0) + v for i, v in bias)
    if ngram is not None:
        out += u8(ngram)
    if bad:
        out += u8(len(bad)) + b"".join(u8(len(w)) + b"".join(u16(i) for i in w) for w in bad)
    if allowed is not None:
        out += ids(allowed) + ids(banned)
    if dry:
        multiplier, base, allowed_length, last_n, breakers = dry
        out += multiplier + base + u8(allowed_length) + u8(last_n & 0xFF) + ids(breakers)
    return out


def sampler_filters(typical=None, top_n_sigma=None, epsilon=None, eta=None, xtc=None, mirostat=None,
                    dynatemp=None, min_keep=None, keep_ties=False, p_less=False, top_h=None):
    """read_filters of fuzz_sampler.cpp (after an empty read_processors): which, then each set one."""
    which = (1 if typical else 0) | (2 if top_n_sigma else 0) | (4 if epsilon else 0) | (8 if eta else 0) | \
        (16 if xtc else 0) | (32 if mirostat else 0) | (64 if dynatemp else 0) | (128 if min_keep is not None else 0)
    out = u8(0) + u8(which)
    for v in (typical, top_n_sigma, epsilon, eta):
        if v:
            out += v
    if xtc:
        out += xtc[0] + xtc[1]
    if mirostat:
        version, tau, eta_m, m = mirostat
        out += u8(version) + tau + eta_m + u8(m)
    if dynatemp:
        out += dynatemp[0] + dynatemp[1]
    if min_keep is not None:
        out += u8(min_keep) + u8(1 if keep_ties else 0)
    if p_less or top_h:
        out += u8((1 if p_less else 0) | (2 if top_h else 0)) + (top_h or b"")
    return out


def order_index(i):
    return u8(1) + u8(i)


def order_names(*names, joined=False):
    out = u8(3 if joined else 2) + u8(len(names)) + b"".join(u8(NAMES[n]) for n in names)
    if joined:
        out += u8(1) * len(names)  # each name followed by one ';'
    return out


def sampler_seeds():
    # Every processor in the default order, over a repetitive history.
    write("fuzz_sampler", "processors", sampler_case(
        temp=frac(31), k=top_k(40), p=frac(37), seed=5, history=[5, 6, 5, 6, 5, 2], history_vocab=40,
        prompt_length=2, rows=[row(40, kind=2, seed=21)],
        processors=sampler_processors(pen=penalties(small(1.5), small(0.5), small(0.25), 64, output=True),
                                      bias=[(3, small(2)), (4, special("-inf"))], ngram=2, bad=[[5, 6], [9]],
                                      allowed=[1, 3, 5, 6, 7, 30], banned=[3],
                                      dry=(small(0.75), small(1.75), 2, -1, [7]))))
    # Issue 11's filters in the default order: typical, top_n_sigma, epsilon, XTC, min_keep, top-k ties.
    write("fuzz_sampler", "filters", sampler_case(
        temp=frac(31), k=top_k(40), seed=8, rows=[row(300, kind=2, seed=31), row(50, kind=1, seed=32)],
        processors=sampler_filters(typical=frac(35), top_n_sigma=small(2), epsilon=frac(1), xtc=(frac(20), frac(2)),
                                   min_keep=3, keep_ties=True)))
    # Mirostat 2 after a dynamic temperature, over three rows (mu moves between them); eta beside it is an error.
    write("fuzz_sampler", "mirostat", sampler_case(
        temp=frac(31), seed=9, rows=[row(200, kind=2, seed=41), row(200, kind=2, seed=42), row(30, kind=1, seed=43)],
        processors=sampler_filters(mirostat=(2, small(3), small(0.25), 100), dynatemp=(small(0.5), small(1)))))
    write("fuzz_sampler", "mirostat_v1_eta", sampler_case(
        temp=frac(31), seed=10, rows=[row(500, kind=2, seed=44)],
        processors=sampler_filters(mirostat=(1, small(5), small(0.125), 100), eta=frac(1))))
    # Issue 20's stages in the default order: p_less and top_h over tied integers and a long row, min_keep 2.
    write("fuzz_sampler", "p_less_top_h", sampler_case(
        temp=frac(31), seed=11, rows=[row(300, kind=1, seed=45), row(1000, kind=2, seed=46)],
        processors=sampler_filters(min_keep=2, p_less=True, top_h=frac(20))))
    # The quick start: six logits, one masked, the default order.
    six = row(6, kind=1, explicit=[(0, small(1)), (1, small(3.5)), (2, small(3)), (3, small(-2)),
                                   (4, small(0.5)), (5, special("-inf"))])
    write("fuzz_sampler", "quickstart", sampler_case(temp=frac(31), k=top_k(40), p=frac(37), m=frac(2),
                                                     seed=42, rows=[six], history=[1, 2]))
    # llama.cpp's chain and order on a long row with masks, in float.
    write("fuzz_sampler", "llama_chain", sampler_case(
        temp=frac(31), k=top_k(40), p=frac(37), m=frac(2), seed=7, order=order_index(LLAMA),
        rows=[row(1999, kind=2, masked_eighths=2, seed=5)]))
    # A user processor first, editing and banning the generated tokens, double rows of two sizes.
    write("fuzz_sampler", "processor_double", sampler_case(
        double=True, ban=True, temp=small(0.5), k=top_k(10), p=frac(35), m=frac(1), seed=3,
        order=order_index(U_DEFAULT), edits=[(3, small(6)), (7, special("-inf")), (70, fixed(12.5))],
        history=[5, 9, 3, 70], prompt_length=2,
        rows=[row(130, kind=2, seed=11), row(64, kind=1, seed=12)]))
    # Temperature 0 over ties, strided rows.
    write("fuzz_sampler", "greedy_ties", sampler_case(
        form=1, temp=special("0"), order=order_index(TEMP_TOPK), k=top_k(5),
        rows=[row(2000, kind=1, seed=2), row(17, kind=0, constant=small(2))]))
    # Extremes in double: the largest and lowest finite, denormals, -0, a tiny temperature.
    write("fuzz_sampler", "extremes_double", sampler_case(
        double=True, temp=special("denorm"), p=frac(1), order=order_index(MINP_TEMP_TOPP), m=special("eps"),
        rows=[row(300, kind=3, seed=9, explicit=[(0, special("max")), (1, special("lowest")), (2, special("denorm")),
                                                  (3, special("-0")), (299, special("max"))])]))
    # Extremes in float, through xt::adapt, with the processor after top_k.
    write("fuzz_sampler", "extremes_float", sampler_case(
        form=2, k=top_k(3), p=frac(20), order=order_index(TOPK_U_TOPP), edits=[(1, special("max")), (2, special("-inf"))],
        rows=[row(70, kind=3, masked_eighths=4, seed=4, explicit=[(1, special("max")), (2, special("lowest")),
                                                                   (65, special("min"))])]))
    # Names: a repeat through parse_stage_order, and an unknown one.
    write("fuzz_sampler", "order_repeat", sampler_case(order=order_names("top_k", "top_p", "top_k", joined=True),
                                                       rows=[row(8)]))
    write("fuzz_sampler", "order_unknown", sampler_case(custom=True, order=order_names("user", "typical", "top_p"),
                                                        rows=[row(8)]))
    # The newest stages listed, their parameters neutral (left out of the chain).
    write("fuzz_sampler", "order_new_stages", sampler_case(order=order_names("top_k_top_p", "p_less", "top_h", "min_p"),
                                                           rows=[row(70)]))
    # A NaN and a +inf in the row; an edit setting NaN.
    write("fuzz_sampler", "bad_row", sampler_case(rows=[row(40, explicit=[(33, special("nan"))]),
                                                        row(9, explicit=[(8, special("inf"))])]))
    write("fuzz_sampler", "bad_edit", sampler_case(order=order_index(U_LLAMA), edits=[(2, special("nan"))],
                                                   rows=[row(12)]))


# --- fuzz_decode ---
FAULT = {"rank0": 0, "rank_other": 1, "wrong_size": 2, "nan": 3, "plus_inf": 4, "all_masked": 5, "empty": 6,
         "rank3_or_beams": 7}


def ids(values):
    return u8(len(values)) + b"".join(u16(v) for v in values)


def decode_case(double=False, use_chain=False, model_logprobs=False, entropy=False, vocab=8, kind=1,
                masked_eighths=0, seed=1, constant=b"", explicit=(), prompt=(), faults=(), wrong_size=0,
                max_tokens=12, min_tokens=0, eos=(), stops=(), top_logprobs=0, temp=small(1), k=0,
                p=small(1), m=small(0), sample_seed=1, beam_width=4, beam_max_tokens=6, beam_eos=(),
                length_penalty=small(1), n_best=2, early_stopping=True, processors=b""):
    out = u8(int(double) | int(use_chain) << 1 | int(model_logprobs) << 2 | int(entropy) << 3)
    out += u8(vocab - 1) + u8(kind | masked_eighths << 2) + u32(seed)
    if kind == 2:
        out += constant
    out += u8(len(explicit)) + b"".join(u16(i) + v for i, v in explicit)
    out += ids(prompt)
    out += u8(len(faults)) + b"".join(u8(call) + u8(FAULT[f]) for call, f in faults) + u8(wrong_size)
    out += u8(max_tokens) + u8(min_tokens) + ids(eos)
    out += u8(len(stops)) + b"".join(ids(s) for s in stops)
    out += u8(top_logprobs) + temp + u8(k) + p + m + u32(sample_seed)
    out += u8(beam_width) + u8(beam_max_tokens) + ids(beam_eos) + length_penalty + u8(n_best) + u8(int(early_stopping))
    return out + processors


def decode_processors(ignore_eos=False, pen=None, dry=None, ngram=None):
    """The byte after the beam's options (fuzz_decode.cpp), then each set one."""
    out = u8(int(ignore_eos) | (2 if pen else 0) | (4 if dry else 0) | (8 if ngram is not None else 0))
    if pen:
        out += pen
    if dry:
        multiplier, allowed_length, last_n = dry
        out += multiplier + u8(allowed_length) + u8(last_n & 0xFF)
    if ngram is not None:
        out += u8(ngram)
    return out


def decode_seeds():
    write("fuzz_decode", "processors", decode_case(
        vocab=10, eos=[0], beam_eos=[0], prompt=[3, 4], max_tokens=20, temp=frac(30),
        processors=decode_processors(ignore_eos=True, pen=penalties(small(1.25), small(0.5), small(0.5), 8),
                                     dry=(small(1), 2, -1), ngram=2)))
    write("fuzz_decode", "plain", decode_case(vocab=8, eos=[0], beam_eos=[0], prompt=[3]))
    write("fuzz_decode", "diagnostics", decode_case(double=True, model_logprobs=True, entropy=True, top_logprobs=3,
                                                    vocab=20, kind=1, eos=[1, 2], min_tokens=5, max_tokens=20,
                                                    temp=frac(31), k=8, p=frac(35), beam_width=8, n_best=8,
                                                    length_penalty=small(0), beam_eos=[1]))
    write("fuzz_decode", "stops_chain", decode_case(use_chain=True, vocab=4, kind=0, stops=[[1, 2], [3]],
                                                    eos=[0], min_tokens=2, temp=small(2), k=3, p=frac(30)))
    write("fuzz_decode", "masked_greedy", decode_case(vocab=32, kind=3, masked_eighths=5, temp=special("0"),
                                                      eos=[31], beam_eos=[31], beam_width=1, n_best=1,
                                                      length_penalty=frac(20), early_stopping=False))
    write("fuzz_decode", "faults", decode_case(vocab=6, faults=[(3, "rank_other"), (1, "wrong_size")], wrong_size=9,
                                               max_tokens=8))
    write("fuzz_decode", "nan_step", decode_case(double=True, vocab=5, faults=[(2, "nan")], max_tokens=6,
                                                 beam_max_tokens=4))
    write("fuzz_decode", "beam_shape", decode_case(vocab=3, faults=[(1, "rank3_or_beams")], beam_width=3,
                                                   n_best=3, beam_max_tokens=5))
    write("fuzz_decode", "extremes", decode_case(double=True, vocab=9, kind=1,
                                                 explicit=[(0, special("max")), (10, special("lowest")),
                                                           (20, special("denorm"))],
                                                 model_logprobs=True, entropy=True, top_logprobs=4))


# --- fuzz_npy ---
NUMPY_SPELLING = "{'descr': '%(descr)s', 'fortran_order': %(fortran)s, 'shape': (%(dims)s), }"


def npy(descr, shape, data, fortran=False, version=1, spelling=NUMPY_SPELLING):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = spelling % {"descr": descr, "fortran": "True" if fortran else "False", "dims": dims}
    preamble = 10 if version == 1 else 12
    header += " " * ((-(preamble + len(header) + 1)) % 64) + "\n"
    length = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + length + header.encode() + data


def npy_seeds():
    write("fuzz_npy", "f4_1d", npy("<f4", [4], struct.pack("<4f", 1, 2, float("-inf"), 0.5)))
    write("fuzz_npy", "f8_2d", npy("<f8", [2, 3], struct.pack("<6d", 1, 2, 3, 4, 5, 6)))
    write("fuzz_npy", "f4_fortran", npy("<f4", [2, 3], struct.pack("<6f", 1, 4, 2, 5, 3, 6), fortran=True))
    write("fuzz_npy", "f8_v2", npy("<f8", [3], struct.pack("<3d", -1, float("nan"), 7), version=2))
    write("fuzz_npy", "truncated", npy("<f4", [2, 8], struct.pack("<3f", 1, 2, 3)))
    write("fuzz_npy", "int_dtype", npy("<i4", [2], struct.pack("<2i", 1, 2)))
    write("fuzz_npy", "f2_2d", npy("<f2", [2, 3], struct.pack("<6H", 0x3c00, 0xc000, 0x7c01, 0x03ff, 0x8000, 0x7c00)))
    write("fuzz_npy", "u2_bf16", npy("<u2", [5], struct.pack("<5H", 0x3f80, 0xc000, 0x7f81, 0x0001, 0x8000)))
    write("fuzz_npy", "rank3", npy("<f4", [1, 1, 2], struct.pack("<2f", 1, 2)))
    write("fuzz_npy", "empty", npy("<f8", [0], b""))
    # Spellings numpy does not write but the reader takes: double quotes, any
    # whitespace, keys in any order (CI's fuzz run found the harness assuming
    # numpy's own spelling).
    six = struct.pack("<6f", 1, 4, 2, 5, 3, 6)
    write("fuzz_npy", "double_quotes", npy("<f4", [2, 3], six,
                                           spelling='{"descr": "%(descr)s", "fortran_order": %(fortran)s, '
                                                    '"shape": (%(dims)s)}'))
    write("fuzz_npy", "tabs_reordered", npy("<f4", [2, 3], six, fortran=True,
                                            spelling="{\t'shape':\t(%(dims)s),\n'fortran_order':%(fortran)s ,"
                                                     "'descr':'%(descr)s'}"))


# --- fuzz_regex ---
def regex_case(pattern, search=False, json=False, reading=0):
    """The flags byte (bit 0 search, bit 1 a JSON string's forbidden bytes, bits 2-3 the reading: 1 both,
    2 either), then the pattern's UTF-8."""
    return u8(int(search) | int(json) << 1 | reading << 2) + pattern.encode("utf-8")


def regex_seeds():
    write("fuzz_regex", "date", regex_case(r"\d{4}-\d{2}-\d{2}"))
    write("fuzz_regex", "email_search", regex_case(r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$", search=True))
    write("fuzz_regex", "phone", regex_case(r"\(?\d{3}\)?[-. ]?\d{3}[-. ]?\d{4}"))
    write("fuzz_regex", "json_number", regex_case(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?"))
    write("fuzz_regex", "alternation_search", regex_case(r"^a|b$|(?:cat|dog)+", search=True))
    write("fuzz_regex", "bounded_repeats", regex_case(r"(a|b){2,5}c{3}d{1,}e?"))
    write("fuzz_regex", "classes", regex_case(r"[^\d\s][\w.\-]*\S\D\W[\]\\]"))
    write("fuzz_regex", "unicode", regex_case("[é-ü]+.€\\u20AC\\uD83D\\uDE00[^a]😀{2}"))
    write("fuzz_regex", "escapes", regex_case(r"\.\*\+\?\|\(\)\[\]\{\}\^\$\\\/\-\n\t\r\f\v\0\x41\cJ"))
    write("fuzz_regex", "json_string", regex_case(r"[^x]{0,8}\t?", json=True))
    write("fuzz_regex", "lazy_nested", regex_case(r"((a*)*b+?(c|)??)*"))
    write("fuzz_regex", "lookahead", regex_case(r"a(?=b)"))
    write("fuzz_regex", "backreference", regex_case(r"(a)\1"))
    write("fuzz_regex", "blowup", regex_case(r"(a|b)*a(a|b){12}"))
    write("fuzz_regex", "bad_range", regex_case(r"[z-a]{3,2}"))
    write("fuzz_regex", "empty", regex_case("", search=True))
    write("fuzz_regex", "inner_anchors", regex_case(r"(^|/)a(\.b|$)|(^x$)*y", search=True))
    write("fuzz_regex", "reading_both", regex_case(r"^\S+\s\D[^\w.]$", json=True, reading=1))
    write("fuzz_regex", "reading_either", regex_case(r"\d\W.[^\s]", search=True, reading=2))
    write("fuzz_regex", "word_boundaries", regex_case(r"\bcat\b|x\B-|^\b$|é\b.", search=True, reading=1))


# --- fuzz_constraint ---
def constraint_case(text, regex=False, budget=None, seed=1):
    """The mode byte (bit 0 a regex, bit 1 a budget, bits 2-4 its slack), the walk's seed, then the text."""
    mode = int(regex) | (0 if budget is None else 2 | (budget & 7) << 2)
    return u8(mode) + u8(seed) + text.encode("utf-8")


def constraint_seeds():
    with open(os.path.join(HERE, "..", "..", "examples", "person.schema.json"), encoding="utf-8") as f:
        person = f.read()
    write("fuzz_constraint", "person", constraint_case(person))
    write("fuzz_constraint", "person_budget", constraint_case(person, budget=0, seed=5))
    write("fuzz_constraint", "any", constraint_case("{}", seed=2))
    write("fuzz_constraint", "array", constraint_case(
        '{"type":"array","items":{"type":"object","properties":{"x":{"type":"number"},'
        '"y":{"type":["integer","null"]}},"required":["x"]},"minItems":1,"maxItems":3}', budget=3))
    write("fuzz_constraint", "enum", constraint_case('{"enum":["red",12,null,{"a":[1]}],"type":["string","number"]}'))
    write("fuzz_constraint", "strings", constraint_case(
        '{"type":"object","additionalProperties":{"type":"string","minLength":2,"maxLength":3}}', seed=7))
    write("fuzz_constraint", "pattern", constraint_case('{"type":"string","pattern":"^[a-c]+@x\\.(com|org)$"}'))
    write("fuzz_constraint", "unsupported", constraint_case('{"type":"object","oneOf":[]}'))
    write("fuzz_constraint", "numbers", constraint_case(
        '{"type":"array","items":{"anyOf":[{"type":"integer","minimum":-3,"exclusiveMaximum":40,"multipleOf":3},'
        '{"type":"number","exclusiveMinimum":0.5,"maximum":12.25}]}}', budget=2, seed=3))
    write("fuzz_constraint", "not", constraint_case(
        '{"type":"object","properties":{"a":{"not":{"anyOf":[{"type":"string"},{"minimum":2}]}},'
        '"b":{"type":"string","not":{"enum":["ab","abc"]}}},"not":{"required":["c"]}}', seed=4))
    write("fuzz_constraint", "oneof", constraint_case(
        '{"type":"object","properties":{"a":{"oneOf":[{"type":"integer","maximum":20},{"type":"number","minimum":3}]}},'
        '"oneOf":[{"required":["a"]},{"required":["b"]}]}', budget=1, seed=6))
    write("fuzz_constraint", "pattern_properties", constraint_case(
        '{"type":"object","properties":{"a":{"type":"string"}},"patternProperties":{"^x-":{"type":"integer"},'
        '"y$":{"type":"number","minimum":2}},"additionalProperties":false}', seed=8))
    write("fuzz_constraint", "unique_counted", constraint_case(
        '{"type":"object","properties":{"t":{"type":"array","uniqueItems":true,"items":{"enum":["a",1,true,null]}},'
        '"u":{"type":"boolean"},"v":{}},"minProperties":2,"maxProperties":2}', budget=2, seed=10))
    write("fuzz_constraint", "unique_objects", constraint_case(
        '{"type":"array","uniqueItems":true,"minItems":2,"items":{"type":"object","properties":{"n":{"type":"string"},'
        '"t":{"type":"array","uniqueItems":true,"items":{"type":"string","maxLength":1}}},"additionalProperties":false}}',
        seed=14))
    write("fuzz_constraint", "conditions", constraint_case(
        '{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"type":"integer",'
        '"if":{"maximum":3},"then":{"minimum":1},'
        '"else":{"multipleOf":5}},"u":{"type":"boolean"},"v":{"type":"null"}},"dependencies":{"u":["v"]}}', seed=11))
    write("fuzz_constraint", "contains", constraint_case(
        '{"type":"array","items":{"enum":[1,2,"red",null]},"contains":{"type":"string"},"maxContains":1,"maxItems":4,'
        '"not":{"items":{"type":"null"}}}', budget=3, seed=12))
    write("fuzz_constraint", "member_kinds", constraint_case(
        '{"type":"object","properties":{"a":{"type":"integer"},"b":{"enum":["x",1]}},"propertyNames":{"maxLength":2},'
        '"oneOf":[{"properties":{"a":{}},"additionalProperties":false},{"patternProperties":{"^b":{"type":"string"}}}],'
        '"not":{"propertyNames":{"not":{"const":"b"}}}}', seed=13))
    # (a bound above 1000: counted at once, no product tried first; cheap enough to mutate often)
    write("fuzz_constraint", "counted_pattern", constraint_case(
        '{"type":"object","properties":{"t":{"type":"string","pattern":"^(\\\\S+\\\\s+){0,3}\\\\S+$","maxLength":1200},'
        '"u":{"anyOf":[{"type":"string","pattern":"^a+$"},{"type":"string","pattern":"^b"}]}}}', budget=1, seed=15))
    write("fuzz_constraint", "regex_date", constraint_case(r"\d{4}-\d{2}-\d{2}", regex=True, budget=2))
    write("fuzz_constraint", "regex_words", constraint_case(r"(ab|abc| )+\.", regex=True, seed=9))


# --- fuzz_request ---
def request_case(text, llama=False, bare=False):
    """The mode byte (bit 0 llama.cpp's dialect, bit 1 a bare context), then the request's text."""
    return u8(int(llama) | int(bare) << 1) + text.encode("utf-8")


def request_seeds():
    write("fuzz_request", "openai", request_case(
        '{"prompt":"cat","max_tokens":5,"temperature":0.7,"top_p":0.9,"top_k":5,"n":2,"best_of":3,"seed":4,'
        '"stop":["t."],"stop_token_ids":[7],"logprobs":2,"presence_penalty":0.5,"logit_bias":{"65":3},'
        '"bad_words":["yes"],"sequence_bias":[[[1,2],-1]]}'))
    write("fuzz_request", "chat_logprobs", request_case(
        '{"prompt":[1,2],"logprobs":true,"top_logprobs":3,"logprobs_mode":"processed_logprobs","min_tokens":2,'
        '"stream":true,"stream_options":{"include_usage":true}}'))
    write("fuzz_request", "schema", request_case(
        '{"prompt":"{","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":'
        '{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}}'))
    write("fuzz_request", "choice", request_case('{"prompt":[3],"guided_choice":["cat","yes"],"min_tokens":1}'))
    write("fuzz_request", "regex", request_case('{"prompt":[3],"structured_outputs":{"regex":"(ab|c)+"}}'))
    write("fuzz_request", "llama", request_case(
        '{"prompt":[1,"cat"],"n_predict":4,"samplers":"kypmxt","dry_multiplier":0.8,"xtc_probability":0.5,'
        '"logit_bias":[[3,false],["yes",1]],"n_probs":2,"grammar":"root ::= \"a\" | \"bb\""}', llama=True))
    write("fuzz_request", "llama_mirostat", request_case(
        '{"prompt":[5],"mirostat":2,"mirostat_tau":3,"stop":["x"],"ignore_eos":true,"cache_prompt":true}', llama=True))
    write("fuzz_request", "bare", request_case('{"prompt":[1,2],"max_tokens":3,"stop_token_ids":[4]}', bare=True))


if __name__ == "__main__":
    sampler_seeds()
    decode_seeds()
    npy_seeds()
    regex_seeds()
    constraint_seeds()
    request_seeds()
