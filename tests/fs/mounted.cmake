# Mounted tests beyond the syscall suite: each script mounts a real kvfs
# under a temporary directory. Exit 77 (skipped) where /dev/fuse is missing.
# Included from tests/CMakeLists.txt; paths are relative to this file.
set(KVFS_TEST_ENV "KVFS_BIN=$<TARGET_FILE:kvfs>;MKFS_BIN=$<TARGET_FILE:mkfs.kvfs>;FSCK_BIN=$<TARGET_FILE:fsck.kvfs>;DUMP_BIN=$<TARGET_FILE:kvfs-dump>;TUNE_BIN=$<TARGET_FILE:kvfs-tune>;CLONE_BIN=$<TARGET_FILE:kvfs-clone>")
set(FS_TESTS ${CMAKE_CURRENT_LIST_DIR})

add_executable(concurrency ${FS_TESTS}/concurrency.c)
target_link_libraries(concurrency PRIVATE Threads::Threads)
add_executable(crash_worker ${FS_TESTS}/crash_worker.c)
add_executable(bigdir ${FS_TESTS}/bigdir.c)

function(kvfs_mount_test name script)
  add_test(NAME fs.${name} COMMAND bash ${FS_TESTS}/${script} ${ARGN})
  set_tests_properties(fs.${name} PROPERTIES ENVIRONMENT "${KVFS_TEST_ENV}"
                       SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS fs)
endfunction()

kvfs_mount_test(copy test_copy.sh)
kvfs_mount_test(concurrency test_concurrency.sh $<TARGET_FILE:concurrency>)
kvfs_mount_test(crash test_crash.sh $<TARGET_FILE:crash_worker>)
kvfs_mount_test(bigdir test_bigdir.sh $<TARGET_FILE:bigdir>)
# A sanitizer build lists fewer entries (test_bigdir.sh) and has the 1800 s
# the sanitizer pass gives.
if(KVFS_SANITIZE)
  set_property(TEST fs.bigdir PROPERTY TIMEOUT 1800)
endif()
kvfs_mount_test(mount test_mount.sh)
kvfs_mount_test(options test_options.sh)

# Permissions between users on an allow_other mount (runs as root; skipped
# otherwise): an unprivileged user against root's files and its own.
kvfs_mount_test(multiuser test_multiuser.sh)
kvfs_mount_test(faults test_faults.sh)
# A full filesystem: fill, delete, write again (max_size, a full host)
kvfs_mount_test(full test_full.sh)

# The image is free once unmounted: release latency, unmount-then-fsck and
# unmount-then-mount rounds, waiting for a daemon on its way out.
kvfs_mount_test(umount test_umount.sh)

# What an fsync costs the device: the syncs of one durable commit, counted
# with strace (skipped without it).
kvfs_mount_test(syncs test_syncs.sh)

# POSIX ACLs with a second user, against a tmpfs doing the same (runs as
# root; skipped otherwise); noacl and kvfs-tune's default.
kvfs_mount_test(acl test_acl.sh)

# Copies that share blocks (copy_file_range): the room a copy and a change
# take, copy on write both ways, deletes, fsck and a remount.
kvfs_mount_test(share test_share.sh)

# kvfs-clone: a tree's copy against cp -a's (as root and as a second user),
# refusals that make nothing, the daemon's own checks, copy on write both
# ways, fsck and a remount.
kvfs_mount_test(clone test_clone.sh)
