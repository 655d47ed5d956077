# snug against the ONNX Runtime oracles of the CI fixtures: prefill + 16
# teacher-forced decode steps per prompt, logits within rtol 1e-3 / atol 1e-4
# and identical greedy ids (check_snug.py). tests/models/CMakeLists.txt's
# models.build sets up the fixtures (FIXTURES_SETUP snug_models).
set(SNUG_CHECK_FIXTURES
  smollm2-135m/optimum smollm2-135m/optimum-noname smollm2-135m/optimum-extdata smollm2-135m/onnxscript
  smollm2-135m/genai smollm2-135m/genai-q41 smollm2-135m/genai-sym
  tiny/optimum tiny/optimum-noname tiny/optimum-extdata tiny/onnxscript tiny/genai tiny/genai-acc0 tiny/genai-fp32
  tiny/genai-sym)
set(SNUG_CHECK_ARGS)
foreach(f ${SNUG_CHECK_FIXTURES})
  list(APPEND SNUG_CHECK_ARGS --fixture ${f})
endforeach()
add_test(NAME models.snug
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/py.sh ${CMAKE_CURRENT_LIST_DIR}/check_snug.py
                 --lib $<TARGET_FILE:snug_shared> --threads 2 ${SNUG_CHECK_ARGS}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(models.snug PROPERTIES
  LABELS models TIMEOUT 1800 FIXTURES_REQUIRED snug_models)

# Issue-5 memory guarantees on the LLM fixtures (tests/plan/check_memory.py),
# each fixture in both weight modes: (a) no allocation in decode steps and (b)
# arena <= 1.10 x lower bound, checked in both; (c) predicted peak within 5%
# of the measured RSS growth, checked under snug.weights=load (nothing of the
# file mapped, so the page cache cannot change the figure) and printed for
# the default map mode, where what a read fault maps of a model file is the
# kernel's choice (freshly written files' large folios are mapped whole), see
# docs/executor.md.
set(SNUG_MEMORY_ARGS)
foreach(f ${SNUG_CHECK_FIXTURES})
  list(APPEND SNUG_MEMORY_ARGS --fixture ${f})
endforeach()
add_test(NAME models.memory
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/plan/check_memory.py --snug $<TARGET_FILE:snug> --check-c
                 ${SNUG_MEMORY_ARGS})
set_tests_properties(models.memory PROPERTIES
  LABELS "models;plan" TIMEOUT 900 FIXTURES_REQUIRED snug_models RUN_SERIAL TRUE)

# The bench/ scripts, checked for their plumbing (tests/models/check_*.py, on the tiny fixtures):
# models.vs_ort_nodes: bench/vs_ort --nodes, both runtimes' per-node times matched by name;
# models.ab_builds_nodes: bench/ab_builds --nodes, per-node minima of two builds grouped by name;
# models.mnb_cache: bench/mnb_cache on small chains;
# models.oracle_f64: tests/models/oracle_f64.py, a float64 oracle for tiny/optimum, snug against it, and the
#   float64 evaluator of the quantized fixtures (snugmodels/ref64.py) against ONNX Runtime's float paths;
# models.strict: the checkers fail on a requested fixture they cannot check (check_strict.py).
foreach(pair "vs_ort_nodes:check_vs_ort_nodes.py" "ab_builds_nodes:check_ab_builds.py" "mnb_cache:check_mnb_cache.py"
        "oracle_f64:check_oracle_f64.py" "strict:check_strict.py")
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 name)
  list(GET pair 1 script)
  add_test(NAME models.${name}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/py.sh ${CMAKE_CURRENT_LIST_DIR}/${script} --snug $<TARGET_FILE:snug>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(models.${name} PROPERTIES LABELS models TIMEOUT 300 FIXTURES_REQUIRED snug_models)
endforeach()

# With the tokenizer: snug generate on the SmolLM2 fixtures against their oracles' chat and raw
# greedy texts, a chat over stdin that keeps the conversation in the KV cache, and its errors
# (check_generate.py); weight streaming under --mem host= budgets: ids identical to the
# unconstrained run, inside a memory cgroup where the machine allows one, the minimum's error
# (check_stream.py).
# On an OpenCL device (PoCL here), both skipped without one: whole models against the host
# (greedy ids, outputs, device memory planned vs the backend's count, the plan's notes, device
# errors: check_device.py), and layers across host and device (the 25/50/75/100% budget sweep
# on SmolLM2 with peaks within the budget, the plan's layers and the host's ids; -ngl; name and
# annotation rules with their coverage and strict mode: check_placement.py).
if(SNUG_HAVE_TOKENIZER AND SNUG_WITH_OPENCL)
  foreach(pair "device;check_device.py" "placement;check_placement.py")
    list(GET pair 0 name)
    list(GET pair 1 script)
    add_test(NAME models.${name}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/py.sh ${CMAKE_CURRENT_LIST_DIR}/${script}
                     --snug $<TARGET_FILE:snug>
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(models.${name} PROPERTIES LABELS "models;backend" TIMEOUT 900 SKIP_RETURN_CODE 77
                         FIXTURES_REQUIRED snug_models)
  endforeach()
endif()

if(SNUG_HAVE_TOKENIZER)
  foreach(pair "generate;check_generate.py" "stream;check_stream.py")
    list(GET pair 0 name)
    list(GET pair 1 script)
    add_test(NAME models.${name}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/py.sh ${CMAKE_CURRENT_LIST_DIR}/${script}
                     --snug $<TARGET_FILE:snug>
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(models.${name} PROPERTIES LABELS models TIMEOUT 600 FIXTURES_REQUIRED snug_models)
  endforeach()
endif()
