# snug generate against onnxruntime-genai itself (PyPI onnxruntime-genai, tests/requirements-genai.txt,
# installed into the project venv by scripts/venv.sh --genai on first use; its pins stay as they are).
# Included from tests/models/CMakeLists.txt.
# models.genai_parity: greedy text of chat and raw prompts, 64 tokens, on smollm2-135m/genai-q41 (identical)
#   and smollm2-135m/genai (identical or parting at a near tie; check_genai_parity.py explains the rule);
# models.vs_genai: bench/vs_genai's plumbing, one round of 8 tokens (check_vs_genai.py).
if(SNUG_HAVE_TOKENIZER)
  foreach(pair "genai_parity:check_genai_parity.py:900" "vs_genai:check_vs_genai.py:300")
    string(REPLACE ":" ";" pair "${pair}")
    list(GET pair 0 name)
    list(GET pair 1 script)
    list(GET pair 2 timeout)
    add_test(NAME models.${name}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/py.sh ${CMAKE_CURRENT_LIST_DIR}/${script} --snug $<TARGET_FILE:snug>
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(models.${name} PROPERTIES LABELS models TIMEOUT ${timeout} FIXTURES_REQUIRED snug_models)
  endforeach()
endif()
