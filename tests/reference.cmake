# Correctness against a reference nobody here wrote: the engine's GPT-2,
# BERT and Llama-style decoders (llama, mixtral, mistral, qwen2, qwen3, phi3,
# gemma, gemma2, qwen3_moe, deepseek_v3, gpt_oss) against Hugging Face transformers
# (config only, random weights, no download), compared through
# autoaccel-reference. Needs torch and transformers in AUTOACCEL_PYTHON
# (scripts/setup installs both); ~75 s on two cores.
if(TARGET autoaccel-reference)
  add_test(NAME reference.hf_models
           COMMAND ${AUTOACCEL_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/reference/check.py
                   --runner $<TARGET_FILE:autoaccel-reference>)
  set_tests_properties(reference.hf_models PROPERTIES
    TIMEOUT 300 LABELS "engine;reference"
    ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;OMP_NUM_THREADS=2")
endif()
