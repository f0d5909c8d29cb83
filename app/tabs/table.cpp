// The one tab table: a tab is added here (and in the Tab enum, ui_state.h), nowhere else.
#include "app/tabs/tab.h"

#include <GLFW/glfw3.h>

#include <stdexcept>

namespace vit::app {

namespace {

const std::vector<TabSpec> kTable = {
    {Tab::Stage, "Stage", "1", GLFW_KEY_1, nullptr, make_stage_tab},
    {Tab::AttentionMaps, "Attention maps", "2", GLFW_KEY_2, nullptr, make_attention_tab},
    {Tab::Changes, "Changes", "3", GLFW_KEY_3, nullptr, make_changes_tab},
    {Tab::Train, "Train", "4", GLFW_KEY_4, nullptr, make_train_tab},
    {Tab::LogitLens, "Logit lens", "5", GLFW_KEY_5, "logit_lens", make_lens_tab},
    {Tab::Positions, "Positions", "6", GLFW_KEY_6, "positions", make_positions_tab},
    {Tab::Filters, "Filters", "7", GLFW_KEY_7, "filters", make_filters_tab},
    {Tab::Distance, "Distance", "8", GLFW_KEY_8, "distance", make_distance_tab},
    {Tab::Patches, "Patches", "9", GLFW_KEY_9, "patches", make_patches_tab},
    {Tab::Map, "Map", "M", GLFW_KEY_M, nullptr, make_map_tab},
    {Tab::Norms, "Token norms", "O", GLFW_KEY_O, "token_norms", make_norms_tab},
    {Tab::Features, "Patch features", "F", GLFW_KEY_F, "features", make_features_tab},
    {Tab::SelfAttention, "Self-attention", "S", GLFW_KEY_S, "self_attention", make_selfattn_tab},
    {Tab::WhatItUses, "What it uses", "I", GLFW_KEY_I, "what_it_uses", make_what_it_uses_tab},
};

// The table is in Tab order: tab_spec(t) is its entry t.
bool in_order() {
    for (size_t i = 0; i < kTable.size(); ++i)
        if (int(kTable[i].tab) != int(i)) return false;
    return true;
}
const bool kInOrder = in_order();

}  // namespace

const std::vector<TabSpec>& tab_table() { return kTable; }
int tab_count() { return int(kTable.size()); }

const TabSpec& tab_spec(Tab t) {
    if (!kInOrder || int(t) < 0 || int(t) >= tab_count()) throw std::logic_error("the tab table is not in Tab order");
    return kTable[size_t(t)];
}

const char* tab_name(Tab t) { return tab_spec(t).name; }

std::string tab_help() {
    std::string h;
    for (const TabSpec& t : kTable)
        h += (h.empty() ? "" : ", ") + std::to_string(int(t.tab)) + " " + t.name + " (key " + t.key + ")";
    return h;
}

Tabs::Tabs(JobQueue& jobs) {
    for (const TabSpec& t : kTable) units_.push_back(t.make(jobs));
}

bool Tabs::working() const {
    for (auto& u : units_)
        if (u->working()) return true;
    return false;
}

void Tabs::tick(ViewCtx& v) {
    for (auto& u : units_) u->tick(v);
}

void Tabs::clear_numbers() {
    for (auto& u : units_) u->clear_numbers();
}

void Tabs::apply_args(const AppArgs& a) {
    for (auto& u : units_) u->apply_args(a);
}

}  // namespace vit::app
