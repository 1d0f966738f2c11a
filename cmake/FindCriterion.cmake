# Finds the Criterion unit-test framework and defines Criterion::Criterion.
find_path(Criterion_INCLUDE_DIR NAMES criterion/criterion.h)
find_library(Criterion_LIBRARY NAMES criterion)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Criterion REQUIRED_VARS Criterion_LIBRARY Criterion_INCLUDE_DIR)
if(Criterion_FOUND AND NOT TARGET Criterion::Criterion)
    add_library(Criterion::Criterion UNKNOWN IMPORTED)
    set_target_properties(Criterion::Criterion PROPERTIES IMPORTED_LOCATION "${Criterion_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${Criterion_INCLUDE_DIR}")
endif()
mark_as_advanced(Criterion_INCLUDE_DIR Criterion_LIBRARY)
