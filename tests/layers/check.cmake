# The layer_rule test: configures tests/layers/project with the compiler and
# generator of the kcr build, in a fresh temporary folder, and builds each
# target in it. The "uses" targets through a declared arrow must compile; the
# others must fail, and fail because the other layer's header is not found
# (not for some unrelated reason). The folder is removed in every case.
#
# cmake -DKCR_C_COMPILER=... -DKCR_GENERATOR=... [-DKCR_MAKE_PROGRAM=...]
#       -DKCR_LAYER_FLAGS=<generated .cmake> -DKCR_PROJECT=<tests/layers/project>
#       -P check.cmake
foreach(var KCR_C_COMPILER KCR_GENERATOR KCR_LAYER_FLAGS KCR_PROJECT)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "check.cmake: -D${var}=... is required")
    endif()
endforeach()

set(tmp_root "$ENV{TMPDIR}")
if(NOT tmp_root)
    set(tmp_root /tmp)
endif()
string(RANDOM LENGTH 10 suffix)
set(work "${tmp_root}/kcr-layer-rule-${suffix}")
file(MAKE_DIRECTORY "${work}")

set(failures "")

# layer_case(target expect): builds target; expect is "compiles" or the
# private header whose absence must be the reason the build fails.
function(layer_case target expect)
    execute_process(COMMAND ${CMAKE_COMMAND} --build "${work}" --target ${target}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(expect STREQUAL "compiles")
        if(NOT rc EQUAL 0)
            set(failures "${failures}\n${target}: a declared dependency failed to compile:\n${out}"
                PARENT_SCOPE)
        else()
            message(STATUS "${target}: compiles (declared arrow)")
        endif()
        return()
    endif()
    string(REPLACE "." "\\." header_re "${expect}")
    if(rc EQUAL 0)
        set(failures "${failures}\n${target}: compiled, but it includes ${expect} from a layer it does not declare: the layer rule is not enforced"
            PARENT_SCOPE)
    elseif(NOT out MATCHES "${header_re}[:']? (No such file or directory|file not found)")
        set(failures "${failures}\n${target}: failed, but not because ${expect} was not found:\n${out}"
            PARENT_SCOPE)
    else()
        message(STATUS "${target}: fails, ${expect} not found (undeclared arrow)")
    endif()
endfunction()

set(configure_args -S "${KCR_PROJECT}" -B "${work}" -G "${KCR_GENERATOR}"
    -DCMAKE_C_COMPILER=${KCR_C_COMPILER} -DKCR_LAYER_FLAGS=${KCR_LAYER_FLAGS})
if(KCR_MAKE_PROGRAM)
    list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${KCR_MAKE_PROGRAM})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} ${configure_args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
    set(failures "configuring ${KCR_PROJECT} failed:\n${out}")
else()
    layer_case(store_uses_object compiles)
    layer_case(informer_uses_below compiles)
    layer_case(controller_uses_below compiles)
    layer_case(testkit_uses_below compiles)
    layer_case(shard_uses_leader compiles)
    layer_case(store_uses_client client/http.h)
    layer_case(client_uses_store store/store_internal.h)
    layer_case(workqueue_uses_object object/object_internal.h)
    layer_case(informer_uses_workqueue workqueue/queue.h)
    layer_case(leader_uses_events events/events_internal.h)
    layer_case(ctrlutil_uses_controller controller/controller_internal.h)
    layer_case(controller_uses_fake fake/fake_internal.h)
    layer_case(shard_uses_informer informer/informer_internal.h)
endif()

file(REMOVE_RECURSE "${work}")
if(failures)
    message(FATAL_ERROR "layer rule check failed:${failures}")
endif()
