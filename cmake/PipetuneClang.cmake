# PIPETUNE_WITH_CLANG: pipetune-rewrite (rewrite/), built against the shared
# clang-cpp and LLVM libraries of Debian's clang-14 dev packages
# (libclang-cpp14-dev, llvm-14-dev). Sets PIPETUNE_HAVE_CLANG and
# PIPETUNE_CLANG_RESOURCE_DIR (Clang's own headers, for parsing sources that
# include the standard library) and prints one `-- pipetune:` line saying
# whether it is built and why not.
set(PIPETUNE_HAVE_CLANG OFF)
if(NOT PIPETUNE_WITH_CLANG)
  message(STATUS "pipetune: pipetune-rewrite: not built (PIPETUNE_WITH_CLANG is OFF)")
  return()
endif()
# Debian installs no version file for ClangConfig; the version is checked below.
find_package(Clang CONFIG QUIET)
if(NOT Clang_FOUND)
  message(STATUS "pipetune: pipetune-rewrite: not built (Clang's CMake package not found: install libclang-cpp14-dev and llvm-14-dev, or set Clang_DIR)")
  return()
endif()
if(NOT LLVM_PACKAGE_VERSION VERSION_GREATER_EQUAL 14 OR NOT LLVM_PACKAGE_VERSION VERSION_LESS 15)
  message(STATUS "pipetune: pipetune-rewrite: not built (found Clang ${LLVM_PACKAGE_VERSION} at ${Clang_DIR}; it needs Clang 14)")
  return()
endif()
if(NOT TARGET clang-cpp OR NOT TARGET LLVM)
  message(STATUS "pipetune: pipetune-rewrite: not built (Clang ${LLVM_PACKAGE_VERSION} has no shared clang-cpp / LLVM library)")
  return()
endif()
set(PIPETUNE_CLANG_RESOURCE_DIR "${LLVM_LIBRARY_DIR}/clang/${LLVM_PACKAGE_VERSION}")
if(NOT EXISTS "${PIPETUNE_CLANG_RESOURCE_DIR}/include/stddef.h")
  message(STATUS "pipetune: pipetune-rewrite: not built (Clang's resource headers are not at ${PIPETUNE_CLANG_RESOURCE_DIR}/include: install libclang-common-14-dev)")
  return()
endif()
set(PIPETUNE_HAVE_CLANG ON)
message(STATUS "pipetune: pipetune-rewrite: built (Clang ${LLVM_PACKAGE_VERSION}, ${Clang_DIR}; shared clang-cpp and LLVM)")
