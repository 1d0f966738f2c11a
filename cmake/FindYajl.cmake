# Finds yajl 2 (streaming JSON parser/generator) and defines Yajl::Yajl.
find_path(Yajl_INCLUDE_DIR NAMES yajl/yajl_parse.h)
find_library(Yajl_LIBRARY NAMES yajl)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Yajl REQUIRED_VARS Yajl_LIBRARY Yajl_INCLUDE_DIR)
if(Yajl_FOUND AND NOT TARGET Yajl::Yajl)
    add_library(Yajl::Yajl UNKNOWN IMPORTED)
    set_target_properties(Yajl::Yajl PROPERTIES IMPORTED_LOCATION "${Yajl_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${Yajl_INCLUDE_DIR}")
endif()
mark_as_advanced(Yajl_INCLUDE_DIR Yajl_LIBRARY)
