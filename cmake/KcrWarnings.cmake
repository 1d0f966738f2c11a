# kcr_warnings(target): the warning set every kcr source compiles clean under.
function(kcr_warnings target)
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                           -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter)
endfunction()
