# What `cmake --install` puts under the prefix (docs/install.md):
#   bin/pipetune                          the CLI
#   include/pipetune/<part>/*.h           each library's public headers
#   lib/libpipetune_<part>.a              the static libraries
#   lib/libpipetune_tracer.so.*           the tracer as a shared library too (C API: tracer_c.h)
#   lib/cmake/pipetune/                   find_package(pipetune 0.1 CONFIG): pipetune::<part>
#   lib/pkgconfig/pipetune-tracer.pc      pkg-config for the tracer
# and the Debian package CPack makes from it (`cpack -G DEB`).
include(CMakePackageConfigHelpers)

set(PIPETUNE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pipetune)
install(EXPORT pipetuneTargets NAMESPACE pipetune:: FILE pipetuneTargets.cmake
        DESTINATION ${PIPETUNE_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/pipetuneConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pipetuneConfig.cmake INSTALL_DESTINATION ${PIPETUNE_CMAKE_DIR})
# 0.x: a minor version may break the interface, so 0.1 accepts only 0.1.*.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pipetuneConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pipetuneConfig.cmake ${PROJECT_BINARY_DIR}/pipetuneConfigVersion.cmake
        DESTINATION ${PIPETUNE_CMAKE_DIR} COMPONENT dev)

# pkg-config: paths relative to the .pc file, so an installed copy can move.
file(RELATIVE_PATH PIPETUNE_PC_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(PIPETUNE_PC_DL "")
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND PIPETUNE_PC_DL " -l${lib}")
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/pipetune-tracer.pc.in ${PROJECT_BINARY_DIR}/pipetune-tracer.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pipetune-tracer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# The Debian package: one package, the CLI, the tracer's shared library and the
# development files. Depends come from dpkg-shlibdeps (libc, libstdc++,
# libturbojpeg, libfmt); the -dev packages the CMake package's find_dependency
# calls need are Recommends, since running the CLI needs none of them.
set(CPACK_PACKAGE_NAME pipetune)
set(CPACK_PACKAGE_VENDOR "pipetune")
set(CPACK_PACKAGE_CONTACT "pipetune maintainers <pipetune@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Profiler and autotuner for machine-learning input pipelines")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "nlohmann-json3-dev, libeigen3-dev, libfmt-dev, libturbojpeg0-dev, pkg-config")
set(CPACK_GENERATOR DEB)
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_IGNORE_FILES "/build.*/" "/\\\\.git/" "/out/" "/examples/image/data/")
include(CPack)
