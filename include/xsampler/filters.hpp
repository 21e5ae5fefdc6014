// xsampler/filters.hpp — the built-in filters, one file each under filters/. (xsampler, BSD-3-Clause)
//
// The filters: stages that reshape or truncate the distribution (stage.hpp
// says what a stage is), each in its own file under filters/ with its
// contract at the top. This header includes temperature.hpp (plain and
// llama.cpp's dynamic form), top_k.hpp, top_p.hpp, levels.hpp (min_p,
// epsilon, eta), p_less.hpp, top_h.hpp and top_k_top_p.hpp (FlashInfer's
// joint mode), which keep a prefix of the rank (logit desc, id asc);
// entropy_filters.hpp includes typical.hpp and top_n_sigma.hpp; xtc.hpp (a
// random filter) and mirostat.hpp (a stage that learns from the draw) are
// included here too.
//
// min_keep (the truncating filters' optional second argument)
//   Never fewer than min_keep tokens of the rank are kept (llama.cpp's
//   min_keep, transformers' min_tokens_to_keep): if the filter's own set is
//   shorter, the top min_keep are kept instead. Default 1; 0 counts as 1 (a
//   filter never empties the set).
#ifndef XSAMPLER_FILTERS_HPP
#define XSAMPLER_FILTERS_HPP

#include "filters/temperature.hpp"
#include "filters/top_k.hpp"
#include "filters/top_p.hpp"
#include "filters/levels.hpp"
#include "filters/p_less.hpp"
#include "filters/top_h.hpp"
#include "filters/top_k_top_p.hpp"
#include "filters/xtc.hpp"
#include "filters/mirostat.hpp"

#endif
