// The timm convention (timm, DeiT, DINO, DINOv2 original and timm, MAE, timm's cls-less ViTs): one plan from
// the key names, the config beside the file and, where nothing else tells, its name.
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

// ---------------------------------------------------------------- timm, DeiT, DINO, DINOv2, MAE (timm's names)
// timm models/vision_transformer.py and deit.py; facebookresearch/deit (timm's model), dino
// vision_transformer.py, dinov2 models/vision_transformer.py, mae models_mae.py / models_vit.py.
Plan plan_timm(const Keys& k, const std::string& R, const Meta& meta, const SideConfig& side, const std::string& what) {
    Plan p = start_plan(Kind::Timm, Family::Timm, R, R + "blocks.");
    Config& c = p.c;
    auto has = [&](const std::string& n) { return k.has(R + n); };
    const ModelConfigFile* timm = side.config && side.config->model.kind == ConfigKind::Timm ? &side.config->model : nullptr;
    const std::string arch = timm && !timm->architectures.empty() ? timm->architectures[0] : "";
    const std::string tag = timm && timm->pretrained_tag ? *timm->pretrained_tag : "";
    const std::set<std::string> name = words(side.name);
    if (has("norm_pre.weight") && (!has("norm.weight") || has("blocks.0.gamma_1")))
        throw FileError(what + ": a Perception Encoder PE-Spatial or PE-Lang in timm's layout (norm_pre.weight without "
                               "'norm.weight' or an attention pool" + std::string(has("blocks.0.gamma_1") ? ", layer scale gamma_1" : "") +
                        "): not supported; PE-Core is");
    if (has("norm_pre.weight"))
        throw FileError(what + ": a CLIP image tower in timm's layout (norm_pre.weight): not supported; open the OpenAI, "
                               "open_clip or Hugging Face release of the same model");
    const bool decoder = k.any_prefix(R + "decoder_blocks.") || has("decoder_embed.weight") || has("decoder_pred.weight");
    const bool dist = has("dist_token"), reg_orig = has("register_tokens"), reg_timm = has("reg_token");
    const bool mask = has("mask_token"), ls = has("blocks.0.ls1.gamma"), head = has("head.weight");
    const bool fc_norm = has("fc_norm.weight") && !has("norm.weight");
    const bool w12 = has("blocks.0.mlp.w12.weight");
    // DINO's checkpoints: the teacher under "teacher." / "backbone.", the full checkpoint's 'teacher'
    const bool dino_root = R.find("backbone.") != std::string::npos || starts(R, "teacher.");
    const bool dino_dict = meta.count("pth.state_dict") && meta.at("pth.state_dict") == "teacher";
    c.eps = 1e-6f;  // timm, DINO, DINOv2 and MAE: LayerNorm(eps=1e-6)
    p.layout = Family::Timm;
    if (decoder) {
        c.family = ModelFamily::Mae;
        c.head = Head::Identity;
        c.pos_rule = PosRule::Mae;
        p.layout = Family::Facebook;
        p.it = "MAE pre-training checkpoint (facebookresearch/mae layout: the encoder and its decoder)";
        p.ignore.push_back({R + "decoder_", "MAE's decoder (decoder_*), which reconstructs the masked patches in pre-training"});
        p.ignore.push_back({R + "mask_token", "MAE's mask_token (the decoder's placeholder for masked patches)"});
        p.notes.push_back("the encoder runs on every patch: pre-training's random masking is not applied");
    } else if (dist) {
        c.family = ModelFamily::DeiT;
        c.dist_token = true;
        c.head = Head::Distilled;
        p.pos_prefix = 2;
        p.it = "DeiT distilled (timm layout: cls, dist and two heads)";
    } else if (reg_orig || (mask && !reg_timm)) {
        c.family = ModelFamily::Dinov2;
        c.head = Head::Identity;
        c.layer_scale = ls;
        p.registers = reg_orig;
        c.pos_rule = reg_orig ? PosRule::Dinov2Reg : PosRule::Dinov2;
        p.layout = Family::Facebook;
        p.it = std::string("DINOv2") + (reg_orig ? " with registers" : "") + " (facebookresearch/dinov2 layout, as torch.hub loads it)";
        if (mask) p.ignore.push_back({R + "mask_token", "mask_token (DINOv2's placeholder for masked patches in training)"});
        if (head)
            throw FileError(what + ": a DINOv2 backbone with a 'head.weight' beside it: DINOv2's linear classifiers read "
                                   "more than the cls token and are not supported; load the backbone alone");
    } else if (!has("cls_token") && (reg_timm || has("fc_norm.weight") || has("norm.weight"))) {
        // timm's ViTs without a cls token (class_token=False, global_pool='avg'): vit_*_reg{1,4}_gap_*
        // average the patches (not the registers), then fc_norm; vit_*_gap_* (fc_norm=False) norm every
        // token first, then average (Pooling::NormMean).
        c.family = ModelFamily::ViT;
        c.cls_token = false;
        c.pooling = fc_norm ? Pooling::Mean : Pooling::NormMean;
        c.head = head ? Head::Classifier : Head::Identity;
        c.layer_scale = ls;
        p.registers = reg_timm;
        p.it = std::string("ViT without a cls token (timm layout, ") + (reg_timm ? "register tokens, " : "") +
               (fc_norm ? "mean of the patches then fc_norm" : "norm on every token then the mean") +
               (ls ? ", layer scale" : "") + ": vit_*" + (reg_timm ? "_reg4" : "") + "_gap_*)";
    } else if (reg_timm) {
        c.family = ModelFamily::Dinov2;
        c.head = head ? Head::Classifier : Head::Identity;
        c.layer_scale = ls;
        p.registers = true;
        p.it = "DINOv2 with registers (timm layout: reg_token, the cls position folded into cls_token)";
    } else if (ls && !head && (arch.find("dinov2") != std::string::npos || name.count("dinov2"))) {
        c.family = ModelFamily::Dinov2;
        c.head = Head::Identity;
        c.layer_scale = true;
        p.it = "DINOv2 (timm layout" + std::string(arch.empty() ? ", named so" : ", " + arch) + ")";
    } else if (head) {
        c.family = ModelFamily::ViT;
        c.layer_scale = ls;
        c.pooling = fc_norm ? Pooling::Mean : Pooling::Cls;
        p.it = std::string("ViT (timm layout") + (ls ? ", with layer scale" : "") + (fc_norm ? ", fc_norm after mean pooling" : "") + ")";
    } else {
        // No head: DINO, MAE's encoder or any headless timm ViT. The keys are the same; the file
        // says which only in its name, its wrapper or its config.
        c.head = Head::Identity;
        c.layer_scale = ls;
        if (fc_norm) c.pooling = Pooling::Mean;
        std::string why;
        if (dino_dict) why = "the checkpoint's 'teacher'";
        else if (dino_root) why = "its '" + R + "' prefix";
        else if (tag == "dino" || starts(tag, "dino_")) why = side.path + " pretrained_cfg.tag '" + tag + "'";
        else if (name.count("dino")) why = "its name";
        if (!why.empty()) {
            c.family = ModelFamily::Dino;
            c.pos_rule = PosRule::Dino;
            p.layout = arch.empty() ? Family::Facebook : Family::Timm;
            p.it = "DINO (" + std::string(arch.empty() ? "facebookresearch/dino layout" : "timm layout") + ", told by " + why + ")";
        } else if (tag == "mae" || name.count("mae")) {
            c.family = ModelFamily::Mae;
            c.pos_rule = PosRule::Mae;
            p.layout = arch.empty() ? Family::Facebook : Family::Timm;
            p.it = "MAE encoder (" + std::string(arch.empty() ? "facebookresearch/mae layout" : "timm layout") + ", told by " +
                   (tag == "mae" ? side.path + " pretrained_cfg.tag" : std::string("its name")) + ")";
        } else {
            c.family = ModelFamily::ViT;
            p.it = "headless ViT (timm layout)";
            p.notes.push_back("no classification head and nothing saying DINO or MAE (a 'dino' or 'mae' in the file "
                              "name, DINO's 'teacher', a timm config.json's tag): run as a headless timm ViT, whose "
                              "output is the final-norm cls token and whose position embeddings resize as timm's do");
        }
    }
    if (c.family == ModelFamily::Dino || (c.family == ModelFamily::Dinov2 && p.layout == Family::Facebook)) {
        // DINO's checkpoints carry the training head beside the backbone, and the student beside the teacher
        std::string parent = R;
        if (ends(parent, "backbone.")) parent = parent.substr(0, parent.size() - 9);
        if (parent != R) {
            p.ignore.push_back({parent + "head.", "the training head (" + parent + "head.*: DINO's projection head)"});
            p.ignore.push_back({parent + "dino_head.", "the training heads (" + parent + "dino_head.*, ibot_head.*)"});
            p.ignore.push_back({parent + "ibot_head.", "the training heads (" + parent + "dino_head.*, ibot_head.*)"});
        }
        if (starts(R, "teacher."))
            p.ignore.push_back({"student.", "the student's copy (student.*), as DINO evaluates the teacher"});
        if (dino_dict) p.notes.push_back("read the checkpoint's 'teacher', as DINO's own loader does; its 'student', "
                                         "optimizer and args are not read");
    }
    // SwiGLU: dinov2's w12 / w3 (fc1 as two halves), or timm's SwiGLUPacked fc1 with twice fc2's columns
    auto rows = [&](const std::string& n) -> int64_t {
        const Array* a = k.get(R + n);
        return a && a->dimension() == 2 ? int64_t(a->shape(0)) : -1;
    };
    auto cols = [&](const std::string& n) -> int64_t {
        const Array* a = k.get(R + n);
        return a && a->dimension() == 2 ? int64_t(a->shape(1)) : -1;
    };
    if (w12 || (rows("blocks.0.mlp.fc1.weight") > 0 && rows("blocks.0.mlp.fc1.weight") == 2 * cols("blocks.0.mlp.fc2.weight")))
        c.act = Act::SwiGlu;
    // Position rows before the grid: cls (and dist), unless the table has the patches' rows only
    // (timm's no_embed_class: DINOv2 with registers in timm, DeiT III with its layer scale, or a
    // timm config saying so; without those, a table one row short is an error, not a guess).
    const bool no_embed_class_possible =
        reg_timm || ls || !c.cls_token || (timm && timm->no_embed_class.value_or(false));
    if (const Array* pos = k.get(R + "pos_embed"); pos && pos->dimension() >= 1 && no_embed_class_possible) {
        const int64_t D = pos->shape(pos->dimension() - 1);
        const int64_t rows_n = D > 0 ? int64_t(pos->size()) / D : 0;
        auto square = [](int64_t n) { int64_t g = std::llround(std::sqrt(double(std::max<int64_t>(n, 0)))); return n > 0 && g * g == n; };
        if (!square(rows_n - p.pos_prefix) && square(rows_n)) {
            c.pos_no_cls = true;
            p.pos_prefix = 0;
        }
    }
    // (without a cls token no_embed_class changes nothing: no prefix token has a position either way)
    if (timm && timm->no_embed_class && *timm->no_embed_class != c.pos_no_cls && c.cls_token)
        throw FileError(side.path + " (the timm config beside " + what + ") says no_embed_class " +
                        (*timm->no_embed_class ? "true" : "false") + " but the checkpoint's pos_embed has " +
                        (c.pos_no_cls ? "no cls row" : "a cls row") + ": it describes another model (move it away)");
    if (c.pos_rule == PosRule::Dinov2Reg && c.pos_no_cls) c.pos_rule = PosRule::Dinov2;  // unreachable: original tables keep cls
    const bool swiglu = c.act == Act::SwiGlu;
    const bool orig_mlp = w12;
    // timm's qkv_bias=False (vit_medium_*_gap_*, many timm ViTs): no block has a q/k/v bias, which is a
    // bias of zeros (nn.Linear(bias=False) adds nothing); a file missing it in some blocks only is broken
    // and stays an error naming them
    const bool no_qkv_bias = has("blocks.0.attn.qkv.weight") && k.containing("attn.qkv.bias").empty();
    if (no_qkv_bias) {
        c.qkv_bias = false;
        p.notes.push_back("no block has a q/k/v bias (timm's qkv_bias=False): the projection adds zeros, as the "
                          "model's nn.Linear(bias=False) does");
    }
    p.source = [R, fc_norm, orig_mlp, reg_orig, swiglu, no_qkv_bias](const std::string& n) -> Src {
        auto [i, rest] = block_of(n);
        if (i >= 0) {
            if (no_qkv_bias && rest == "attn.qkv.bias") return Src{};
            if (orig_mlp && starts(rest, "mlp.fc1.")) return one(R + "blocks." + std::to_string(i) + ".mlp.w12." + rest.substr(8));
            if (orig_mlp && starts(rest, "mlp.fc2.")) return one(R + "blocks." + std::to_string(i) + ".mlp.w3." + rest.substr(8));
            (void)swiglu;
            return one(R + n);
        }
        if (n == "reg_token") return one(R + (reg_orig ? "register_tokens" : "reg_token"));
        if (fc_norm && starts(n, "norm.")) return one(R + "fc_" + n);
        return one(R + n);
    };
    return p;
}

}  // namespace layouts_detail
}  // namespace vit
