// The workbench's keyboard shortcuts.
#include <GLFW/glfw3.h>

#include <algorithm>

#include "tabs/tab.h"
#include "tensor_access.h"
#include "views.h"

namespace vit::app {

void HandleKeys(ViewCtx& v) {
    Session& s = v.s;
    UiState& ui = v.ui;
    const Trace* t = s.trace();
    if (!t || ImGui::GetIO().WantTextInput) return;
    auto pressed = [](int key) { return ImGui::IsKeyPressed(key); };
    const size_t n = t->size(), row = row_of(*t, ui.stage);
    if (pressed(GLFW_KEY_RIGHT) || pressed(GLFW_KEY_DOWN)) select_row(ui, *t, std::min(n - 1, row + 1));
    if (pressed(GLFW_KEY_LEFT) || pressed(GLFW_KEY_UP)) select_row(ui, *t, row ? row - 1 : 0);
    if (pressed(GLFW_KEY_HOME)) select_row(ui, *t, 0);
    if (pressed(GLFW_KEY_END)) select_row(ui, *t, n - 1);
    const auto e = shown_stage(s, ui);
    if (e && e->info->layer >= 0 && (pressed(GLFW_KEY_PAGE_UP) || pressed(GLFW_KEY_PAGE_DOWN))) {
        const int l = e->info->layer + (pressed(GLFW_KEY_PAGE_DOWN) ? 1 : -1);
        select_stage(ui, *t, StageId{e->info->id.kind, l});  // the same stage in the next or previous block
    }
    bool shift = ImGui::GetIO().KeyShift;
    int H = std::max(1, s.shown_config().heads);
    if (pressed(GLFW_KEY_H)) ui.head = (ui.head + (shift ? H - 1 : 1)) % H;
    Options o = s.options();
    if (pressed(GLFW_KEY_A)) o.affine = !o.affine;
    if (pressed(GLFW_KEY_U)) o.unbiased = !o.unbiased;
    if (pressed(GLFW_KEY_B)) o.bug_scale_after_softmax = !o.bug_scale_after_softmax;
    if (pressed(GLFW_KEY_R)) o.bug_reshape_patches = !o.bug_reshape_patches;
    s.set_options(o);
    if (pressed(GLFW_KEY_G)) ui.show_grad = !ui.show_grad;
    if (pressed(GLFW_KEY_X)) ui.show_box = !ui.show_box;
    if (pressed(GLFW_KEY_0)) { ui.zoom = 1; ui.pan_x = ui.pan_y = 0; }
    if (pressed(GLFW_KEY_ESCAPE)) { ui.patch = -1; ui.cell_r = ui.cell_c = -1; }
    if (pressed(GLFW_KEY_Q)) {  // attention from a token: Q shows it, then steps the query token (Shift: back)
        const int T = t->table().dims().T;  // the run's tokens: cls, registers, dist, patches
        if (ui.overlay != Overlay::Query) ui.overlay = Overlay::Query;
        else ui.query = ((ui.query + (shift ? -1 : 1)) % T + T) % T;
    }
    for (const TabSpec& t : tab_table())
        if (pressed(t.glfw_key)) ui.tab = t.tab;
}

}  // namespace vit::app
