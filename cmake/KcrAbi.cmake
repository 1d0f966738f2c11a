# The shared libraries' ABI identity (docs/abi.md): the SONAME, the symbol
# version node and the version script that exports only kcr_*.
#
# Before 1.0 every 0.MINOR release may break the ABI, so the SONAME carries
# the minor (libkcr.so.0.1); from 1.0.0 on it is the major alone
# (libkcr.so.1) and only an incompatible release bumps it.
if(PROJECT_VERSION_MAJOR EQUAL 0)
    set(KCR_SOVERSION "0.${PROJECT_VERSION_MINOR}")
else()
    set(KCR_SOVERSION "${PROJECT_VERSION_MAJOR}")
endif()
set(KCR_ABI_NODE "KCR_${KCR_SOVERSION}")
# The abidiff gate fails the build's tests from 1.0.0 on; before, it reports.
if(PROJECT_VERSION VERSION_GREATER_EQUAL 1.0.0)
    set(KCR_ABI_ENFORCED 1)
else()
    set(KCR_ABI_ENFORCED 0)
endif()

# kcr_abi_library(TARGET): TARGET gets the SONAME above and a version script
# exporting kcr_* only.
function(kcr_abi_library target)
    set(KCR_ABI_LIB "lib${target}.so")
    set(map "${CMAKE_BINARY_DIR}/${target}.map")
    configure_file("${PROJECT_SOURCE_DIR}/cmake/kcr.map.in" "${map}" @ONLY)
    set_target_properties(${target} PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${KCR_SOVERSION}
                          LINK_DEPENDS "${map}")
    target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
endfunction()
