/* Candle: a C11 inference framework for transformer models. */
#ifndef CANDLE_H
#define CANDLE_H

#include "api.h"
#include "version.h"
#include "log.h"
#include "status.h"
#include "dtype.h"
#include "tensor.h"
#include "ops.h"
#include "graph.h"
#include "backend.h"
#include "memory.h"
#include "gguf.h"
#include "safetensors.h"
#include "ct2.h"
#include "audio.h"
#include "quantize.h"
#include "tokenizer.h"
#include "model.h"
#include "lora.h"
#include "encoder.h"
#include "whisper.h"
#include "sampler.h"
#include "chat.h"
#include "jinja.h"
#include "tools.h"
#include "kv_pool.h"
#include "batch.h"
#include "kld.h"
#include "speculative.h"

#endif
