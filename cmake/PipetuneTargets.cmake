# Helpers that give every pipetune target the same warnings, sanitizers and
# layout (public headers in include/, sources beside private headers in src/),
# and install the libraries into the `pipetune` CMake package
# (cmake/PipetuneInstall.cmake).

include(GNUInstallDirs)

# Warnings are errors only when asked (PIPETUNE_WERROR, scripts/test.sh turns
# it on): a newer compiler's new warning must not break a user's build.
set(PIPETUNE_WARNINGS -Wall -Wextra -Wno-missing-field-initializers)
if(PIPETUNE_WERROR)
  list(APPEND PIPETUNE_WARNINGS -Werror)
endif()

if(PIPETUNE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# Precompiled headers (PIPETUNE_PCH): the heavy headers most translation
# units include; the third-party ones only where a target links them (the
# tracer is standard library only). Measured in docs/benchmarks-ci.md.
set(PIPETUNE_STD_PCH_HEADERS <string> <vector> <memory> <optional> <functional> <map> <atomic> <mutex>)
set(PIPETUNE_PCH_HEADERS ${PIPETUNE_STD_PCH_HEADERS} <nlohmann/json.hpp> <fmt/format.h>)
set(PIPETUNE_TEST_PCH_HEADERS ${PIPETUNE_PCH_HEADERS} <gtest/gtest.h> <gmock/gmock.h>)

# pipetune_library(NAME <short> SOURCES ... DEPS ... [PRIVATE_DEPS ...] [NO_INSTALL])
# creates pipetune_<short> with alias pipetune::<short>, and (unless
# NO_INSTALL) installs it and its include/ as the package's pipetune::<short>.
function(pipetune_library)
  cmake_parse_arguments(ARG "HEADER_ONLY;NO_INSTALL" "NAME" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target pipetune_${ARG_NAME})
  if(ARG_HEADER_ONLY)
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                                   $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${target} INTERFACE ${ARG_DEPS})
  else()
    add_library(${target} STATIC ${ARG_SOURCES})
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                                $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
                                         PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
    target_compile_options(${target} PRIVATE ${PIPETUNE_WARNINGS})
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    if(PIPETUNE_PCH)
      if("${ARG_DEPS};${ARG_PRIVATE_DEPS}" MATCHES "pipetune::models|nlohmann_json|fmt::fmt")
        target_precompile_headers(${target} PRIVATE ${PIPETUNE_PCH_HEADERS})
      else()
        target_precompile_headers(${target} PRIVATE ${PIPETUNE_STD_PCH_HEADERS})
      endif()
    endif()
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${ARG_NAME})
  add_library(pipetune::${ARG_NAME} ALIAS ${target})
  if(NOT ARG_NO_INSTALL)
    install(TARGETS ${target} EXPORT pipetuneTargets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
    install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
            COMPONENT dev FILES_MATCHING PATTERN "*.h")
  endif()
endfunction()

# pipetune_test(NAME <name> SOURCES ... DEPS ...): one GoogleTest binary per
# module, its tests discovered by CTest.
function(pipetune_test)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_options(${ARG_NAME} PRIVATE ${PIPETUNE_WARNINGS})
  target_compile_definitions(${ARG_NAME} PRIVATE
    PIPETUNE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" PIPETUNE_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # One translation unit per test binary: its files share the heavy headers
  # (GoogleTest, nlohmann/json, fmt), which then parse once. Helpers in the
  # files' anonymous namespaces must have distinct names.
  if(PIPETUNE_UNITY_TESTS)
    set_target_properties(${ARG_NAME} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
  endif()
  if(PIPETUNE_PCH)
    target_precompile_headers(${ARG_NAME} PRIVATE ${PIPETUNE_TEST_PCH_HEADERS})
    foreach(source ${ARG_SOURCES})  # C sources (tracer_test's C API test) take no C++ header
      if(source MATCHES "\\.c$")
        set_source_files_properties(${source} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
  endif()
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 300)
endfunction()
