#include "exports.h"

#include "core/teach.h"

#include "core/image.h"
#include "core/io.h"

namespace vit::app {

namespace {
std::string safe_name(std::string s) {
    for (auto& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') ch = '_';
    return s;
}
}  // namespace

std::vector<std::string> run_exports(AppContext& app, int W, int H) {
    (void)W;
    Session& s = app.s;
    UiState& ui = app.ui;
    std::vector<std::string> failed;
    auto attempt = [&](const char* what, const std::string& path, auto&& write) {
        try {
            write();
            ui.status = "saved " + path;
        } catch (const std::exception& e) {
            s.add_error(std::string("Could not export ") + what + " to '" + path + "'", e.what());
            failed.push_back(e.what());
        }
    };
    const TraceEntry* cur = current_entry(s, ui);
    auto nothing = [&](const char* what) {
        std::string why = s.has_image() ? "the model has not produced a trace yet" : "no image is loaded, so nothing has run";
        s.add_error(std::string("Could not export ") + what, why);
        failed.push_back(why);
    };
    if (ui.request_view_png) {
        if (!cur) nothing("the view");
        else {
            Rect r = ui.rects["center"];
            std::string p = ui.export_dir + "/vitscope-" + (ui.tab == Tab::LogitLens ? std::string("logit_lens") : safe_name(cur->name)) + ".png";
            attempt("the view", p, [&] {
                auto px = read_pixels(int(r.x), int(r.y), int(r.w), int(r.h), H);
                write_png(p, px.data(), int(r.w), int(r.h), 3);
            });
        }
    }
    if (ui.request_npy && ui.tab == Tab::LogitLens) {  // on the logit lens tab: its (L, K) numbers
        if (app.tx.lens_vals.size() == 0) nothing("the logit lens");
        else {
            std::string p = ui.export_dir + "/logit_lens.npy";
            const Array& lv = app.tx.lens_vals;
            attempt("the logit lens", p, [&] { write_file_atomic(p, npy_bytes(lv.data(), shape_of(lv))); });
        }
    } else if (ui.request_npy) {
        if (!cur) nothing("the tensor");
        else {
            std::string p = ui.export_dir + "/" + safe_name(cur->name) + ".npy";
            attempt("the tensor", p, [&] { write_file_atomic(p, npy_bytes(cur->tensor.data(), shape_of(cur->tensor))); });
        }
    }
    if (ui.request_npz) {
        if (!s.trace()) nothing("the trace");
        else {
            std::string p = ui.export_dir + "/vitscope-trace.npz";
            attempt("the trace", p, [&] {
                std::vector<ArrayRef> items;
                for (auto& e : s.trace()->entries()) items.push_back(array_ref(e.name, e.tensor));
                // d logit[pred] / d stage, named <stage>.grad, when this run computed them
                if (const Trace* g = s.result().grads.get())
                    for (auto& e : g->entries()) items.push_back(array_ref(e.name, e.tensor));
                // the options in force, as the CLI's trace records them
                write_npz(p, items, {{"__options__", options_json(s.options(), s.config())}});
            });
        }
    }
    ui.request_view_png = ui.request_npy = ui.request_npz = false;
    return failed;
}

}  // namespace vit::app
