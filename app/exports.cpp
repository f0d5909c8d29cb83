#include "exports.h"

#include "core/teach/teach.h"

#include <cstdio>

#include "core/io/image.h"
#include "core/io/io.h"

namespace vit::app {

namespace {
std::string safe_name(std::string s) {
    for (auto& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') ch = '_';
    return s;
}


// An array as CSV: '#' lines with its name and shape and the options (interventions included) that
// produced it (numpy.loadtxt skips them), then one line per index of the first axis with the rest
// flattened (a 1-D array is one line), %.9g (float round-trips).
std::string csv_bytes(const std::string& name, const Array& a, const std::string& options) {
    const Shape sh = shape_of(a);
    std::string out = "# " + name + " " + shape_str(sh) + (sh.size() > 2 ? ": rows are the first axis, the rest flattened (C order)" : "") + "\n";
    out += "# options: " + options + "\n";
    const size_t rows = sh.size() <= 1 ? 1 : sh[0], cols = rows ? a.size() / std::max<size_t>(rows, 1) : 0;
    char b[32];
    for (size_t r = 0; r < rows; ++r) {
        for (size_t c = 0; c < cols; ++c) {
            std::snprintf(b, sizeof b, "%s%.9g", c ? "," : "", double(a.data()[r * cols + c]));
            out += b;
        }
        out += "\n";
    }
    return out;
}
}  // namespace

std::vector<std::string> run_exports(AppContext& app, int W, int H) {
    (void)W;
    Session& s = app.s;
    const UiState& ui = app.ui;
    ExportRequest& req = app.exports;
    // A tab with an export name in the tab table exports the numbers it drew instead of the current stage.
    const TabSpec& tab = tab_spec(ui.tab);
    std::vector<std::string> failed;
    auto attempt = [&](const char* what, const std::string& path, auto&& write) {
        try {
            write();
            app.notice = "saved " + path;
        } catch (const std::exception& e) {
            s.add_error(std::string("Could not export ") + what + " to '" + path + "'", e.what());
            failed.push_back(e.what());
        }
    };
    const auto cur = shown_stage(s, ui);
    auto nothing = [&](const char* what) {
        std::string why = s.has_image() ? "the model has not produced a trace yet" : "no image is loaded, so nothing has run";
        s.add_error(std::string("Could not export ") + what, why);
        failed.push_back(why);
    };
    if (req.view_png) {
        if (!cur) nothing("the view");
        else {
            Rect r = app.probe.rects["center"];  // logical pixels: the framebuffer's are font_scale times more
            const float sc = app.font_scale > 0 ? app.font_scale : 1.f;
            r = Rect{r.x * sc, r.y * sc, r.w * sc, r.h * sc};
            std::string p = app.export_dir + "/vitscope-" + (tab.export_name ? std::string(tab.export_name) : safe_name(cur->info->name)) + ".png";
            attempt("the view", p, [&] {
                auto px = read_pixels(int(r.x), int(r.y), int(r.w), int(r.h), H);
                write_png(p, px.data(), int(r.w), int(r.h), 3);
            });
        }
    }
    const NamedArrays& numbers = app.tabs[ui.tab].numbers();
    if (req.npy && tab.export_name) {  // a teaching tab: the numbers it drew, as .npy and .csv
        const std::string what = std::string("the ") + tab.name + " numbers";
        if (numbers.empty()) {
            std::string why = !s.has_image() ? "no image is loaded, so nothing has run"
                                             : std::string("the ") + tab.name + " tab shows no numbers (it says why in place)";
            s.add_error("Could not export " + what, why);
            failed.push_back(why);
        }
        for (const auto& [name, arr] : numbers) {
            std::string p = app.export_dir + "/" + safe_name(name);
            attempt(what.c_str(), p + ".npy", [&] { write_file_atomic(p + ".npy", npy_bytes(arr.data(), shape_of(arr))); });
            attempt(what.c_str(), p + ".csv", [&] {
                write_file_atomic(p + ".csv", csv_bytes(name, arr, options_json(s.shown_options(), s.shown_config())));
            });
        }
    } else if (req.npy) {
        if (!cur) nothing("the tensor");
        else {
            std::string p = app.export_dir + "/" + safe_name(cur->info->name) + ".npy";
            attempt("the tensor", p, [&] { write_file_atomic(p, npy_bytes(cur->value->data(), shape_of(*cur->value))); });
            // the gradient view shows d logit[pred] / d stage: it is exported too, as <stage>.grad.npy
            if (ui.show_grad && cur->grad) {
                std::string pg = app.export_dir + "/" + safe_name(cur->info->name) + ".grad.npy";
                attempt("the gradient", pg, [&] { write_file_atomic(pg, npy_bytes(cur->grad->data(), shape_of(*cur->grad))); });
            }
        }
    }
    if (req.npz) {
        if (!s.trace()) nothing("the trace");
        else {
            std::string p = app.export_dir + "/vitscope-trace.npz";
            attempt("the trace", p, [&] {
                const Trace& t = *s.trace();
                if (t.on_demand()) {
                    // every stage, streamed as `vitscope-cli trace --out` writes it: a row the pass did not
                    // keep comes from its block recomputed into a trace of this export's own (one block
                    // at a time: the trace's cache and the views' blocks are left alone)
                    Trace blk;
                    int held = -1;
                    std::vector<LazyTensor> items;
                    for (size_t i = 0; i < t.size(); ++i) {
                        const StageInfo& si = t.info(i);
                        items.push_back({si.name, si.shape, [&t, &blk, &held, i]() -> const float* {
                                             if (t.kept(i)) return t.at(i).data();
                                             const int l = t.info(i).layer;
                                             if (held != l) {
                                                 blk = t.block(l);
                                                 held = l;
                                             }
                                             return blk.at(i).data();
                                         },
                                         nullptr});
                    }
                    // then d logit[pred] / d stage, <stage>.grad, in the same order (as a recorded trace writes
                    // them): a gradient the pass did not keep comes from its block's backward pass, computed
                    // with its stages into a trace of this export's own, one block at a time
                    Trace gblk;
                    int gheld = -1;
                    for (size_t i = 0; i < t.size(); ++i) {
                        if (!t.has_grad_at(i)) continue;
                        const StageInfo& si = t.info(i);
                        items.push_back({si.name + ".grad", si.shape, [&t, &blk, &held, &gblk, &gheld, i]() -> const float* {
                                             if (t.grad_kept(i)) return t.grad_at(i)->data();
                                             const int l = t.info(i).layer;
                                             if (gheld != l) {
                                                 blk = Trace();  // the stages' block is done with: one block held
                                                 held = -1;
                                                 gblk = t.block(l, true);
                                                 gheld = l;
                                             }
                                             const Array* g = gblk.grad_at(i);
                                             if (!g) throw std::logic_error("no gradient of " + t.name(i) + " from its block");
                                             return g->data();
                                         },
                                         nullptr});
                    }
                    write_npz_streamed(p, items, {{"__options__", options_json(s.shown_options(), s.shown_config())}});
                    return;
                }
                std::vector<ArrayRef> items;
                for (size_t i = 0; i < t.size(); ++i) items.push_back(array_ref(t.name(i), t.at(i)));
                // d logit[pred] / d stage, named <stage>.grad, when this run computed them
                for (size_t i = 0; i < t.size(); ++i)
                    if (const Array* g = t.grad_at(i)) items.push_back(array_ref(t.name(i) + ".grad", *g));
                // the options and model that produced this trace, as the CLI's trace records them
                write_npz(p, items, {{"__options__", options_json(s.shown_options(), s.shown_config())}});
            });
        }
    }
    req = ExportRequest{};
    return failed;
}

}  // namespace vit::app
