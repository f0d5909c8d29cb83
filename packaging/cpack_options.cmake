# Read by cpack at packaging time. A package must run on any x86-64, so a build
# compiled with -march=native (VITSCOPE_NATIVE=ON) is refused: package with
# packaging/build-deb.sh, which builds with -DVITSCOPE_NATIVE=OFF.
# VITSCOPE_PACKAGE_NATIVE=1 in the environment overrides this, for a package
# meant only for the machine it was built on (and for the install test).
if(CPACK_VITSCOPE_NATIVE AND NOT "$ENV{VITSCOPE_PACKAGE_NATIVE}" STREQUAL "1")
  message(FATAL_ERROR "vitscope: this build uses -march=native (VITSCOPE_NATIVE=ON); its binaries may not run on "
                      "other x86-64 machines. Build packages with packaging/build-deb.sh (-DVITSCOPE_NATIVE=OFF), "
                      "or set VITSCOPE_PACKAGE_NATIVE=1 for a package for this machine only.")
endif()
