# Install rules: libraries, headers, CMake package config (find_package(kcr))
# and a pkg-config file (pkg-config kcr).
include(CMakePackageConfigHelpers)

set(kcr_install_targets kcr kcr_static kcr_testing) # kcr::testing: tests only
if(KCR_BUILD_HTTP)
    list(APPEND kcr_install_targets kcr_http kcr_http_static) # kcr::http, kcr::http_static
endif()
if(KCR_BUILD_WEBHOOK)
    # kcr::webhook, kcr::webhook_static and the development certificate tool
    list(APPEND kcr_install_targets kcr_webhook kcr_webhook_static kcr-webhook-certs)
endif()
install(TARGETS ${kcr_install_targets} EXPORT kcrTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/kcr DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/include/kcr/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kcr)

set(kcr_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kcr)
install(EXPORT kcrTargets NAMESPACE kcr:: DESTINATION ${kcr_cmake_dir})
configure_package_config_file(cmake/kcrConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/kcrConfig.cmake INSTALL_DESTINATION ${kcr_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kcrConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kcrConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/kcrConfigVersion.cmake
              cmake/FindYajl.cmake cmake/FindLibYAML.cmake cmake/FindMicroHTTPD.cmake
              cmake/KcrGenerateTypes.cmake
        DESTINATION ${kcr_cmake_dir})

file(RELATIVE_PATH KCR_PC_PREFIX_FROM_PCDIR "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(cmake/kcr.pc.in ${CMAKE_CURRENT_BINARY_DIR}/kcr.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kcr.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
configure_file(cmake/kcr-testing.pc.in ${CMAKE_CURRENT_BINARY_DIR}/kcr-testing.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kcr-testing.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(KCR_BUILD_HTTP)
    configure_file(cmake/kcr-http.pc.in ${CMAKE_CURRENT_BINARY_DIR}/kcr-http.pc @ONLY)
    install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kcr-http.pc
            DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
if(KCR_BUILD_WEBHOOK)
    configure_file(cmake/kcr-webhook.pc.in ${CMAKE_CURRENT_BINARY_DIR}/kcr-webhook.pc @ONLY)
    install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kcr-webhook.pc
            DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
