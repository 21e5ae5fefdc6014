// xsampler/entropy_filters.hpp — the filters that read the shape of the whole set. (xsampler, BSD-3-Clause)
//
// Filters that read the shape of the whole kept set — its entropy or the
// spread of its logits — before they cut: typical (filters/typical.hpp) and
// top_n_sigma (filters/top_n_sigma.hpp); the dynamic temperature, which reads
// the entropy too, is temperature's second form (filters/temperature.hpp).
#ifndef XSAMPLER_ENTROPY_FILTERS_HPP
#define XSAMPLER_ENTROPY_FILTERS_HPP

#include "filters.hpp"
#include "filters/top_n_sigma.hpp"
#include "filters/typical.hpp"

#endif
