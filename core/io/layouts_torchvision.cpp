// The torchvision convention (conv_proj, encoder.layers.*), and ViTScope's own names.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>

#include "core/io/layouts_internal.h"

namespace vit {
namespace layouts_detail {

// ---------------------------------------------------------------- torchvision
Plan plan_torchvision(const Keys& k, const std::string& R) {
    Plan p = start_plan(Kind::Torchvision, Family::Torchvision, R, R + "encoder.layers.encoder_layer_");
    p.c.eps = 1e-6f;
    p.it = "ViT (torchvision layout)";
    const bool disk = k.has(R + "encoder.layers.encoder_layer_0.mlp.linear_1.weight");  // older torchvision files
    p.source = [disk, R](const std::string& n) -> Src {
        if (n == "cls_token") return one(R + "class_token");
        if (n == "pos_embed") return one(R + "encoder.pos_embedding");
        if (starts(n, "patch_embed.proj.")) return one(R + "conv_proj." + n.substr(17));
        auto [i, rest] = block_of(n);
        if (i >= 0) {
            const std::string b = R + "encoder.layers.encoder_layer_" + std::to_string(i) + ".";
            auto [mod, prm] = split_param(rest);
            if (mod == "norm1") return one(b + "ln_1." + prm);
            if (mod == "norm2") return one(b + "ln_2." + prm);
            if (mod == "attn.qkv") return one(b + "self_attention.in_proj_" + prm);
            if (mod == "attn.proj") return one(b + "self_attention.out_proj." + prm);
            if (mod == "mlp.fc1") return one(b + (disk ? "mlp.linear_1." : "mlp.0.") + prm);
            if (mod == "mlp.fc2") return one(b + (disk ? "mlp.linear_2." : "mlp.3.") + prm);
            return one(b + rest);
        }
        if (starts(n, "norm.")) return one(R + "encoder.ln." + n.substr(5));
        if (starts(n, "head.")) return one(R + "heads.head." + n.substr(5));
        return one(R + n);
    };
    return p;
}

// ViTScope's own files: every tensor under for_each_param's name.
Plan plan_own() {
    Plan p;
    p.source = [](const std::string& n) { return one(n); };
    return p;
}

}  // namespace layouts_detail
}  // namespace vit
