# Install layout and the Debian package.
#
#   bin/vitscope, bin/vitscope-cli
#   share/vitscope/{samples/,classes/,shaders/,fmnist_vit.safetensors,scenes_vit.safetensors}   (app/paths.cpp finds it from bin/)
#   share/applications/vitscope.desktop, share/icons/hicolor/256x256/apps/vitscope.png
#   share/doc/vitscope/{README.md,LICENSE,copyright,docs/,assets/screenshots/}
#
# The layout is fixed (bin/ next to share/): the app finds its data as
# <exe>/../share/vitscope, so an installed tree can be moved anywhere.
#
# Packages are built with packaging/build-deb.sh, which configures a separate
# build with -DVITSCOPE_NATIVE=OFF; cpack refuses a -march=native build (see
# packaging/cpack_options.cmake).

set(VITSCOPE_DATA share/vitscope)
# Installed binaries keep the run path the build links with (Debian's OpenBLAS
# lives in /usr/lib/<triplet>/openblas-pthread/, outside the default search
# path): the installed copy runs the same BLAS the tests and benchmarks ran.
set_target_properties(vitscope-cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
if(TARGET vitscope)
  set_target_properties(vitscope PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
endif()
install(TARGETS vitscope-cli RUNTIME DESTINATION bin)
if(TARGET vitscope)
  install(TARGETS vitscope RUNTIME DESTINATION bin)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/vitscope.desktop DESTINATION share/applications)
  install(FILES ${PROJECT_SOURCE_DIR}/assets/icon.png DESTINATION share/icons/hicolor/256x256/apps RENAME vitscope.png)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/assets/samples ${PROJECT_SOURCE_DIR}/assets/classes ${PROJECT_SOURCE_DIR}/assets/lessons DESTINATION ${VITSCOPE_DATA})
install(FILES ${PROJECT_SOURCE_DIR}/shaders/heatmap.vert ${PROJECT_SOURCE_DIR}/shaders/heatmap.frag
        DESTINATION ${VITSCOPE_DATA}/shaders)
if(EXISTS ${PROJECT_SOURCE_DIR}/assets/fmnist_vit.safetensors)
  install(FILES ${PROJECT_SOURCE_DIR}/assets/fmnist_vit.safetensors DESTINATION ${VITSCOPE_DATA})
endif()
if(EXISTS ${PROJECT_SOURCE_DIR}/assets/scenes_vit.safetensors)  # embedded too; the file for other tools
  install(FILES ${PROJECT_SOURCE_DIR}/assets/scenes_vit.safetensors DESTINATION ${VITSCOPE_DATA})
endif()
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/packaging/copyright
        DESTINATION share/doc/vitscope)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/assets/screenshots DESTINATION share/doc/vitscope/assets)  # the README's pictures
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs DESTINATION share/doc/vitscope)  # the pages the README links

set(VITSCOPE_MAINTAINER "ViTScope maintainers <vitscope@invalid>" CACHE STRING "Maintainer field of the .deb")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME vitscope)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${VITSCOPE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "see inside a Vision Transformer, stage by stage")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "ViTScope runs a real Vision Transformer (C++, OpenBLAS; equal to PyTorch stage
by stage) and shows every intermediate tensor of its forward pass: patches,
patch and position embeddings, every LayerNorm, Q/K/V, attention scores and
patterns, the MLP and the logits, with attention overlays and rollout on the
image. Toggle LayerNorm's elementwise_affine or unbiased std and watch every
later stage change; train a small ViT on Fashion-MNIST and watch it learn.
.
Loads timm, Hugging Face and torchvision checkpoints. Includes vitscope (the
desktop app, OpenGL 3.3) and vitscope-cli (info, trace to .npz, train, eval).")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${VITSCOPE_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends: the packages owning the libraries the binaries link (dpkg-shlibdeps),
# plus the font the app draws its text with and the certificates libcurl checks the
# Hugging Face hub's HTTPS against (libcurl4 only recommends them).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "fonts-dejavu-core, ca-certificates")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_VITSCOPE_NATIVE ${VITSCOPE_NATIVE})
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/packaging/cpack_options.cmake)
include(CPack)
