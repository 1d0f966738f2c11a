# kcr_warnings(target): the warning set every kcr source compiles clean under.
# Calls through a function pointer of the wrong type are errors: they compile
# with a warning that is easy to miss in a long build, then crash at run time.
function(kcr_warnings target)
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                           -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
                           -Werror=incompatible-pointer-types -Werror=implicit-function-declaration)
endfunction()
