// TEMPORARY stub, not committed
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>
#include "types.hpp"
namespace xsampler {
struct regex_options { bool search=false; std::array<bool,256> forbidden{}; std::size_t max_states=10000; };
class byte_dfa { public:
 static constexpr std::int32_t dead=-1;
 std::int32_t start() const noexcept {return 0;}
 std::int32_t next(std::int32_t s, unsigned char b) const noexcept { return (s==0 && b=='a') ? 1 : (s==1 && b=='b') ? 2 : dead; }
 bool accepting(std::int32_t s) const noexcept {return s==2;}
 std::size_t size() const noexcept {return 3;}
 std::size_t distance(std::int32_t s) const noexcept {return 2-s;}
 unsigned char completion_byte(std::int32_t s) const { return s==0?'a':'b'; }
};
inline byte_dfa compile_regex(std::string_view, const regex_options& = {}) { return {}; }
}
