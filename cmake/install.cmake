# `cmake --install build [--prefix P]` (or `make install PREFIX=P`): the
# public headers, libcandle.a and libcandle.so, the candle CLI, a pkg-config
# file and a CMake package (find_package(Candle): Candle::candle, the shared
# library, and Candle::candle_static).
include(CMakePackageConfigHelpers)

install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/candle DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(TARGETS candle candle_shared EXPORT CandleTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET candle_cli)
  install(TARGETS candle_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# candle.pc finds the prefix from its own place (${pcfiledir}), so the file
# is right wherever --prefix (or DESTDIR) puts it, not only at the prefix
# configured.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(CANDLE_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH candle_pc_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" candle_pc_up "${candle_pc_up}")
  set(CANDLE_PC_PREFIX "\${pcfiledir}/${candle_pc_up}")
endif()
set(CANDLE_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
set(CANDLE_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
foreach(v LIBDIR INCLUDEDIR)
  if(NOT IS_ABSOLUTE "${CANDLE_PC_${v}}")
    set(CANDLE_PC_${v} "\${prefix}/${CANDLE_PC_${v}}")
  endif()
endforeach()
configure_file(${CMAKE_SOURCE_DIR}/cmake/candle.pc.in ${CMAKE_BINARY_DIR}/candle.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/candle.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CANDLE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Candle)
install(EXPORT CandleTargets NAMESPACE Candle:: DESTINATION ${CANDLE_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/CandleConfig.cmake.in
  ${CMAKE_BINARY_DIR}/CandleConfig.cmake INSTALL_DESTINATION ${CANDLE_CMAKE_DIR})
# SameMajorVersion: the same promise as the shared library's SOVERSION.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/CandleConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/CandleConfig.cmake ${CMAKE_BINARY_DIR}/CandleConfigVersion.cmake
  DESTINATION ${CANDLE_CMAKE_DIR})
