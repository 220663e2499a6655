# Helpers that give every pipetune target the same warnings, sanitizers and
# layout (public headers in include/, sources beside private headers in src/).

set(PIPETUNE_WARNINGS -Wall -Wextra -Werror -Wno-missing-field-initializers)

if(PIPETUNE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# pipetune_library(NAME <short> SOURCES ... DEPS ... [PRIVATE_DEPS ...])
# creates pipetune_<short> with alias pipetune::<short>.
function(pipetune_library)
  cmake_parse_arguments(ARG "HEADER_ONLY" "NAME" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target pipetune_${ARG_NAME})
  if(ARG_HEADER_ONLY)
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(${target} INTERFACE ${ARG_DEPS})
  else()
    add_library(${target} STATIC ${ARG_SOURCES})
    target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                         PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
    target_compile_options(${target} PRIVATE ${PIPETUNE_WARNINGS})
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
  add_library(pipetune::${ARG_NAME} ALIAS ${target})
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
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 300)
endfunction()
