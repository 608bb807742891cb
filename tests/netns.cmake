# Gangs across hosts: four workers, each in a network namespace of its own
# (ip netns, veth pairs to a bridge), and the coordinator in a fifth; a
# world-size-4 `autoaccel tune` runs gangs with one rank per namespace
# (tests/netns/gang_across_namespaces.py). Needs root and `ip` (iproute2);
# skipped otherwise, saying why. Only the standard library of Python.
if(AUTOACCEL_BUILD_SERVICES AND AUTOACCEL_BUILD_ENGINE)
  add_test(NAME netns.gang_across_namespaces
           COMMAND ${AUTOACCEL_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/netns/gang_across_namespaces.py
                   --server $<TARGET_FILE:autoaccel-server>
                   --worker $<TARGET_FILE:autoaccel-worker>
                   --cli $<TARGET_FILE:autoaccel>)
  set_tests_properties(netns.gang_across_namespaces PROPERTIES
    TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "e2e;netns")
endif()
