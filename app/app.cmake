# The desktop app: GLFW + OpenGL 3.3 core + Dear ImGui (Debian's libimgui.a
# carries the GLFW and OpenGL3 backends).
find_package(OpenGL REQUIRED)
pkg_check_modules(GLFW3 REQUIRED IMPORTED_TARGET glfw3)
pkg_check_modules(IMGUI REQUIRED IMPORTED_TARGET imgui)

file(READ ${CMAKE_CURRENT_SOURCE_DIR}/shaders/heatmap.vert VITSCOPE_HEATMAP_VERT)
file(READ ${CMAKE_CURRENT_SOURCE_DIR}/shaders/heatmap.frag VITSCOPE_HEATMAP_FRAG)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/app/shaders_embedded.h.in
               ${CMAKE_CURRENT_BINARY_DIR}/generated/shaders_embedded.h @ONLY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${CMAKE_CURRENT_SOURCE_DIR}/shaders/heatmap.vert ${CMAKE_CURRENT_SOURCE_DIR}/shaders/heatmap.frag)

# Each centre tab is a unit of its own (app/tabs/tab_*.cpp), registered in app/tabs/table.cpp.
add_executable(vitscope app/main.cpp app/app_args.cpp app/frame.cpp app/exports.cpp app/headless.cpp app/headless_drivers.cpp
               app/gl_util.cpp app/jobs.cpp app/session.cpp app/probe.cpp app/heatmap.cpp app/layout.cpp app/panel_toolbar.cpp app/panel_navigator.cpp app/panel_image.cpp app/panel_image_size.cpp app/panel_predictions.cpp app/panel_status.cpp app/keys.cpp app/scene_truth.cpp
               app/tabs/table.cpp app/tabs/tab_common.cpp app/tabs/tab_stage.cpp app/tabs/stage_panels.cpp app/tabs/tab_attention.cpp app/tabs/tab_changes.cpp
               app/tabs/tab_train.cpp app/tabs/tab_lens.cpp app/tabs/tab_positions.cpp app/tabs/tab_filters.cpp
               app/tabs/tab_distance.cpp app/tabs/tab_patches.cpp app/tabs/tab_map.cpp
               app/tabs/tab_norms.cpp app/tabs/tab_features.cpp app/tabs/tab_selfattn.cpp app/tabs/tab_interventions.cpp
               app/interventions_ui.cpp
               app/lessons.cpp app/learn.cpp app/learn_steps.cpp app/learn_steps_attention.cpp app/paths.cpp app/settings.cpp app/settings_app.cpp app/heads_prompt.cpp app/model_scan.cpp
               app/text_capture.cpp app/text_wrap.cpp)
# Every text ImGui draws passes through ImDrawList::AddText: wrapped so that the sweep can read what the
# screen says (app/text_capture.h); wrapped text is measured (ImFont::CalcTextSizeA) and drawn with its
# lines never broken inside a number (app/text_wrap.h)
set(VITSCOPE_TEXT_WRAPS
    "LINKER:--wrap=_ZN10ImDrawList7AddTextEPK6ImFontfRK6ImVec2jPKcS7_fPK6ImVec4"
    "LINKER:--wrap=_ZN10ImDrawList7AddTextERK6ImVec2jPKcS4_"
    "LINKER:--wrap=_ZNK6ImFont13CalcTextSizeAEfffPKcS1_PS1_")
target_link_options(vitscope PRIVATE ${VITSCOPE_TEXT_WRAPS})
target_include_directories(vitscope PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/generated)
# No source path is compiled in: app/paths.cpp finds the data next to the
# executable (<prefix>/share/vitscope when installed). In the build tree this
# one-line file, never installed, points it at the source tree's assets/.
file(GENERATE OUTPUT $<TARGET_FILE_DIR:vitscope>/vitscope-source-dir CONTENT "${CMAKE_CURRENT_SOURCE_DIR}\n")
target_link_libraries(vitscope PRIVATE vitscope_core PkgConfig::IMGUI PkgConfig::GLFW3 PkgConfig::STB
                      OpenGL::GL CLI11::CLI11 ${CMAKE_DL_LIBS})
