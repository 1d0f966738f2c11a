# kcr_generate_types(TARGET target SCHEMA crd.yaml PREFIX prefix [NAME name]
#                    [OUTPUT_DIR dir])
# Runs kcr-gen over a CustomResourceDefinition (YAML or JSON, every version)
# at build time and adds the generated <name>.c to `target`, with <name>.h on
# its include path (docs/types.md). NAME defaults to <prefix>_types,
# OUTPUT_DIR to <current binary dir>/kcr-types. The files are regenerated when
# the schema or kcr-gen changes. Works in kcr's own tree and from an installed
# kcr (find_package(kcr) defines kcr::kcr-gen).
function(kcr_generate_types)
    cmake_parse_arguments(G "" "TARGET;SCHEMA;PREFIX;NAME;OUTPUT_DIR" "" ${ARGN})
    foreach(arg TARGET SCHEMA PREFIX)
        if(NOT G_${arg})
            message(FATAL_ERROR "kcr_generate_types: ${arg} is required")
        endif()
    endforeach()
    if(G_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR "kcr_generate_types: unknown arguments ${G_UNPARSED_ARGUMENTS}")
    endif()
    if(NOT TARGET kcr::kcr-gen)
        message(FATAL_ERROR "kcr_generate_types: kcr::kcr-gen is not defined (find_package(kcr) first)")
    endif()
    if(NOT G_NAME)
        set(G_NAME ${G_PREFIX}_types)
    endif()
    if(NOT G_OUTPUT_DIR)
        set(G_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/kcr-types)
    endif()
    get_filename_component(schema ${G_SCHEMA} ABSOLUTE)
    set(h ${G_OUTPUT_DIR}/${G_NAME}.h)
    set(c ${G_OUTPUT_DIR}/${G_NAME}.c)
    file(MAKE_DIRECTORY ${G_OUTPUT_DIR})
    add_custom_command(OUTPUT ${h} ${c}
        COMMAND kcr::kcr-gen --prefix ${G_PREFIX} --header ${h} --source ${c} ${schema}
        DEPENDS ${schema} kcr::kcr-gen
        COMMENT "kcr-gen: ${G_PREFIX} types from ${G_SCHEMA}"
        VERBATIM)
    target_sources(${G_TARGET} PRIVATE ${c} ${h})
    target_include_directories(${G_TARGET} PUBLIC ${G_OUTPUT_DIR})
endfunction()
