#include "core/model/tensor.h"

#include <sstream>
#include <stdexcept>

namespace vit {

size_t shape_numel(const Shape& s) {
    size_t n = 1;
    for (size_t d : s) n *= d;
    return n;
}

std::string shape_str(const Shape& s) {
    std::ostringstream o;
    o << "(";
    for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
    if (s.size() == 1) o << ",";
    o << ")";
    return o.str();
}

}  // namespace vit
