# Finds libmicrohttpd (the metrics/health endpoint of kcr_http) through
# pkg-config, with a plain header/library search as the fallback, and defines
# MicroHTTPD::MicroHTTPD.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
    pkg_check_modules(PC_MicroHTTPD QUIET libmicrohttpd)
endif()
find_path(MicroHTTPD_INCLUDE_DIR NAMES microhttpd.h HINTS ${PC_MicroHTTPD_INCLUDE_DIRS})
find_library(MicroHTTPD_LIBRARY NAMES microhttpd HINTS ${PC_MicroHTTPD_LIBRARY_DIRS})
set(MicroHTTPD_VERSION ${PC_MicroHTTPD_VERSION})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MicroHTTPD
    REQUIRED_VARS MicroHTTPD_LIBRARY MicroHTTPD_INCLUDE_DIR
    VERSION_VAR MicroHTTPD_VERSION)
if(MicroHTTPD_FOUND AND NOT TARGET MicroHTTPD::MicroHTTPD)
    add_library(MicroHTTPD::MicroHTTPD UNKNOWN IMPORTED)
    set_target_properties(MicroHTTPD::MicroHTTPD PROPERTIES
        IMPORTED_LOCATION "${MicroHTTPD_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${MicroHTTPD_INCLUDE_DIR}")
endif()
mark_as_advanced(MicroHTTPD_INCLUDE_DIR MicroHTTPD_LIBRARY)
