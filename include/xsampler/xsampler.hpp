// xsampler/xsampler.hpp — the umbrella header. (xsampler, BSD-3-Clause)
// The umbrella header: every public header but two. Left out: json_schema.hpp
// and request.hpp, which need nlohmann-json (include them where JSON Schema or
// completion requests are wanted). The detail/ headers come in through the
// public ones. Not part of the library at all: the tool's tokenizer
// (tool/tokenizer.hpp; an engine builds a `vocabulary` from its own
// tokenizer's bytes).
#ifndef XSAMPLER_XSAMPLER_HPP
#define XSAMPLER_XSAMPLER_HPP

#include "version.hpp"
#include "types.hpp"
#include "vocabulary.hpp"
#include "regex.hpp"
#include "random.hpp"
#include "row.hpp"
#include "candidates.hpp"
#include "softmax.hpp"
#include "stage.hpp"
#include "processors.hpp"
#include "penalties.hpp"
#include "dry.hpp"
#include "filters.hpp"
#include "entropy_filters.hpp"
#include "select.hpp"
#include "chain.hpp"
#include "sampler.hpp"
#include "batch.hpp"
#include "sequence.hpp"
#include "generate.hpp"
#include "grammar.hpp"
#include "matcher.hpp"
#include "json_grammar.hpp"
#include "gbnf.hpp"
#include "constraint.hpp"
#include "beam_search.hpp"
#include "vote.hpp"
#include "speculative.hpp"

#endif
