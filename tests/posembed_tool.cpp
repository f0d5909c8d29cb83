// Test helper for tests/parity/test_pos_embed.py: runs core/model/pos_embed on the
// cases listed in a file and writes each result as .npy, for PyTorch to compare.
//   posembed_tool CASES.txt
// Each line of CASES.txt is one case:
//   grid  IN.npy OUT.npy MODE AA OUT_H OUT_W SCALE_H SCALE_W
//         IN.npy is (in_h, in_w, D); MODE bicubic|bilinear; AA 0|1; SCALE_* 0 for "by size"
//   table IN.npy OUT.npy RULE PREFIX OLD_H OLD_W NEW_H NEW_W
//         IN.npy is (rows, D); RULE timm|dino|dinov2|dinov2_reg|hf|hf_aa|open_clip|mae
// A case that the core refuses writes its message to OUT.npy.err instead.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/io/io.h"
#include "core/model/pos_embed.h"

using namespace vit;

namespace {

PosEmbedRule rule_named(const std::string& r) {
    if (r == "timm") return pos_rule_timm();
    if (r == "dino") return pos_rule_dino();
    if (r == "dinov2") return pos_rule_dinov2(false);
    if (r == "dinov2_reg") return pos_rule_dinov2(true);
    if (r == "hf") return pos_rule_hf(false);
    if (r == "hf_aa") return pos_rule_hf(true);
    if (r == "open_clip") return pos_rule_open_clip();
    if (r == "mae") return pos_rule_mae();
    throw std::runtime_error("unknown rule " + r);
}

void run_case(const std::string& line) {
    std::istringstream in(line);
    std::string kind, src, dst;
    in >> kind >> src >> dst;
    try {
        Array a = read_npy(src);
        std::vector<float> out;
        Shape shape;
        if (kind == "grid") {
            std::string mode;
            int aa = 0, oh = 0, ow = 0;
            double sh = 0, sw = 0;
            in >> mode >> aa >> oh >> ow >> sh >> sw;
            if (a.dimension() != 3) throw std::runtime_error("grid must be (h, w, D)");
            InterpSpec s;
            s.mode = mode == "bilinear" ? InterpMode::Bilinear : InterpMode::Bicubic;
            s.antialias = aa != 0;
            s.scale_h = sh;
            s.scale_w = sw;
            const int D = int(a.shape(2));
            out = interpolate_grid(a.data(), int(a.shape(0)), int(a.shape(1)), D, oh, ow, s);
            shape = {size_t(oh), size_t(ow), size_t(D)};
        } else if (kind == "table") {
            std::string rule;
            int prefix = 0, oh = 0, ow = 0, nh = 0, nw = 0;
            in >> rule >> prefix >> oh >> ow >> nh >> nw;
            if (a.dimension() != 2) throw std::runtime_error("table must be (rows, D)");
            const int D = int(a.shape(1));
            out = resize_pos_embed(a.data(), int(a.shape(0)), D, prefix, oh, ow, nh, nw, rule_named(rule));
            shape = {out.size() / size_t(D), size_t(D)};
        } else {
            throw std::runtime_error("unknown case kind " + kind);
        }
        write_file_atomic(dst, npy_bytes(out.data(), shape));
    } catch (const std::invalid_argument& e) {
        std::ofstream(dst + ".err") << e.what() << "\n";
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: posembed_tool CASES.txt\n");
        return 2;
    }
    try {
        std::ifstream f(argv[1]);
        if (!f) throw std::runtime_error(std::string("cannot read ") + argv[1]);
        std::string line;
        while (std::getline(f, line))
            if (!line.empty()) run_case(line);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "posembed_tool: %s\n", e.what());
        return 1;
    }
    return 0;
}
