# KCR_SANITIZE selects a sanitizer build for everything in the tree:
#   address -> AddressSanitizer + UndefinedBehaviorSanitizer (halt on first error)
#   thread  -> ThreadSanitizer
if(KCR_SANITIZE STREQUAL "address")
    add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                        -fno-omit-frame-pointer -g)
    add_link_options(-fsanitize=address,undefined)
elseif(KCR_SANITIZE STREQUAL "thread")
    add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -g -O1)
    add_link_options(-fsanitize=thread)
elseif(NOT KCR_SANITIZE STREQUAL "")
    message(FATAL_ERROR "KCR_SANITIZE must be '', 'address' or 'thread', not '${KCR_SANITIZE}'")
endif()
