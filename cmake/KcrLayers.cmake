# The layer rule (docs/architecture.md): each top-level folder of the library
# is one OBJECT library, kcr_<layer>, that sees the private headers of its own
# layer and of the layers it declares below it, and nothing else.
#
# Private headers are included by their path from the source root
# ("store/store_internal.h"). Instead of the source root, each layer target
# gets include roots generated in the build tree: <build>/layers/<layer>/ holds
# one symlink, <layer> -> <source>/<layer>. A layer's own root and those of its
# declared dependencies (transitively, through PUBLIC links) are on its include
# path; any other layer's "x/y.h" is simply not found, so an undeclared
# cross-layer include fails to compile. Public headers (include/kcr/) are
# visible to every layer.

# kcr_sources(src...): called in a layer folder's CMakeLists.txt; the sources
# go into that layer's target (the folder's first path component names it).
function(kcr_sources)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
    string(REGEX REPLACE "/.*" "" layer "${rel}")
    foreach(src IN LISTS ARGN)
        get_filename_component(abs ${src} ABSOLUTE)
        set_property(GLOBAL APPEND PROPERTY KCR_LAYER_SOURCES_${layer} ${abs})
    endforeach()
    set_property(GLOBAL APPEND PROPERTY KCR_LAYERS_WITH_SOURCES ${layer})
endfunction()

# kcr_layer_include_root(layer out_var): creates <build>/layers/<layer>/<layer>
# -> <source>/<layer> and returns the folder to put on an include path.
function(kcr_layer_include_root layer out_var)
    set(root ${PROJECT_BINARY_DIR}/layers/${layer})
    file(MAKE_DIRECTORY ${root})
    # Recreated at every configure, so a moved source tree is followed.
    file(REMOVE ${root}/${layer})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${layer} ${root}/${layer} SYMBOLIC)
    set(${out_var} ${root} PARENT_SCOPE)
endfunction()

# kcr_layer(NAME [DEPENDS layer...] [LIBS imported-target...]): defines the
# OBJECT library kcr_<NAME> from the sources its folder registered, with its
# own include root and its declared layers (and their third-party libraries)
# as usage requirements. Declare layers bottom-up.
function(kcr_layer name)
    cmake_parse_arguments(L "" "" "DEPENDS;LIBS" ${ARGN})
    get_property(sources GLOBAL PROPERTY KCR_LAYER_SOURCES_${name})
    if(NOT sources)
        message(FATAL_ERROR "kcr_layer(${name}): ${name}/CMakeLists.txt registered no sources")
    endif()
    kcr_layer_include_root(${name} root)
    add_library(kcr_${name} OBJECT ${sources})
    target_include_directories(kcr_${name}
        PUBLIC ${root}
               ${PROJECT_SOURCE_DIR}/include
               ${PROJECT_BINARY_DIR}/include)
    target_compile_definitions(kcr_${name} PRIVATE KCR_BUILDING _POSIX_C_SOURCE=200809L)
    foreach(dep IN LISTS L_DEPENDS)
        if(NOT TARGET kcr_${dep})
            message(FATAL_ERROR "kcr_layer(${name}): layer ${dep} is not declared (yet); "
                                "declare layers bottom-up")
        endif()
        target_link_libraries(kcr_${name} PUBLIC kcr_${dep})
    endforeach()
    target_link_libraries(kcr_${name} PUBLIC ${L_LIBS})
    kcr_warnings(kcr_${name})
    set_property(GLOBAL APPEND PROPERTY KCR_LAYERS ${name})
endfunction()

# kcr_layers_check(): every folder that registered sources is a declared layer.
function(kcr_layers_check)
    get_property(with_sources GLOBAL PROPERTY KCR_LAYERS_WITH_SOURCES)
    get_property(declared GLOBAL PROPERTY KCR_LAYERS)
    foreach(layer IN LISTS with_sources)
        if(NOT layer IN_LIST declared)
            message(FATAL_ERROR "${layer}/ registers sources but is no layer: add "
                                "kcr_layer(${layer} DEPENDS ...) to the top-level CMakeLists.txt")
        endif()
    endforeach()
endfunction()
