# `cmake --install build --prefix P`: libqkv (shared and static), the public headers, the qkv binary, qkv.pc for
# pkg-config, a CMake package (find_package(qkv) gives qkv::qkv) and man pages made from each subcommand's --help.
# Everything installed refers to its own location (${pcfiledir}, the export's _IMPORT_PREFIX), so P is free.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS qkv_shared EXPORT qkvTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS qkv ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS qkv_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/qkv DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# pkg-config: `pkg-config --libs qkv` links the shared library; `--static` adds what libqkv.a needs. When the
# OpenMP build of OpenBLAS is linked by path, its directory goes first so -lopenblas finds it there.
set(QKV_PC_LIBS_PRIVATE "")
if(QKV_BLAS_LIB STREQUAL "${QKV_OPENBLAS_OPENMP}/libopenblas.so.0")
  set(QKV_PC_LIBS_PRIVATE "-L${QKV_OPENBLAS_OPENMP} -Wl,-rpath,${QKV_OPENBLAS_OPENMP} ")
endif()
string(APPEND QKV_PC_LIBS_PRIVATE "${OpenMP_C_FLAGS} -lm")
if(QKV_MPI_DEPS) # libqkv.a's dist_mpi.c calls MPI: a static link needs the MPI library too
  list(JOIN MPI_C_LIBRARIES " " QKV_PC_MPI)
  string(APPEND QKV_PC_LIBS_PRIVATE " ${QKV_PC_MPI}")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/qkv.pc.in ${CMAKE_BINARY_DIR}/qkv.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/qkv.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(EXPORT qkvTargets NAMESPACE qkv:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/qkvConfig.cmake.in ${CMAKE_BINARY_DIR}/qkvConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/qkvConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/qkvConfig.cmake ${CMAKE_BINARY_DIR}/qkvConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)

# Man pages: qkv(1) and qkv-<command>(1), written after every link of the binary from what it prints.
add_custom_command(TARGET qkv_cli POST_BUILD
                   COMMAND ${CMAKE_COMMAND} -DQKV=$<TARGET_FILE:qkv_cli> -DOUT=${CMAKE_BINARY_DIR}/man
                           -DVERSION=${PROJECT_VERSION} -P ${CMAKE_SOURCE_DIR}/cmake/manpages.cmake
                   VERBATIM)
install(DIRECTORY ${CMAKE_BINARY_DIR}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 FILES_MATCHING PATTERN "*.1")
