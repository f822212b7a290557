/* libqkv: attention-based language models in C. Include this one header for the whole public API. */
#ifndef QKV_QKV_H
#define QKV_QKV_H

#include "qkv/error.h"
#include "qkv/tensor.h"
#include "qkv/rng.h"
#include "qkv/autograd.h"
#include "qkv/ops.h"
#include "qkv/attention.h"
#include "qkv/threads.h"
#include "qkv/safetensors.h"
#include "qkv/params.h"
#include "qkv/optim.h"
#include "qkv/schedule.h"
#include "qkv/checkpoint.h"
#include "qkv/data.h"
#include "qkv/metrics.h"
#include "qkv/text.h"
#include "qkv/shard.h"
#include "qkv/init.h"
#include "qkv/rnn.h"
#include "qkv/embmean.h"
#include "qkv/nn.h"
#include "qkv/model.h"
#include "qkv/viz.h"
#include "qkv/glove.h"
#include "qkv/hf.h"
#include "qkv/transformer_classifier.h"
#include "qkv/train.h"
#include "qkv/config.h"
#include "qkv/plot.h"

#define QKV_VERSION "0.1.0"

#endif
