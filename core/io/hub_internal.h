// What hub.cpp (the transfers) and hub_parse.cpp (names and replies) share; not part of the hub's interface.
#pragma once
#include <cstddef>
#include <string>

namespace vit::hub::detail {

std::string strip(std::string s);  // without leading and trailing white space
bool word_char(char c);            // [A-Za-z0-9_]
// A name that can be one path component: commits and ETags from the server become file names.
bool safe_component(const std::string& s, size_t max_len);

}  // namespace vit::hub::detail
