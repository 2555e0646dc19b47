/* Hugging Face checkpoints in GGUF's vocabulary: per model_type, the tensor
 * names, the config.json fields and the conventions transformers stores its
 * weights in (Gemma's norms as w for a (1 + w) multiplier), the way
 * llama.cpp's converter translates them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights-impl.h"

/* How a tensor is given: as stored, as f32 (vectors the norms and biases
 * apply to f32 activations), or as a norm weight. */
typedef enum { T_W, T_VEC, T_NORM } tkind;

typedef struct hf_name {
    const char *hf;   /* after "model.layers.N." for layer tensors */
    const char *gguf; /* after "blk.N." */
    tkind kind;
} hf_name;

typedef struct hf_key {
    const char *hf;   /* config.json field */
    const char *gguf; /* after "<arch>." */
    char type;        /* 'i' integer, 'f' number, 'b' boolean */
} hf_key;

struct hf_family {
    const char *model_type;
    const char *arch;
    const hf_name *global;    /* NULL-terminated */
    const char *layer_prefix; /* "model.layers." */
    const hf_name *layer;     /* NULL-terminated */
    const hf_key *keys;   /* family fields beyond the common ones, NULL-terminated */
    bool norm_plus_one;   /* norms stored as w, used as (1 + w) */
    const char *act_field; /* config field naming the FFN activation */
    const char *act;       /* the one the architecture computes */
    const char *task_prefix; /* a task model's base-model prefix ("roberta"); NULL: model_type */
    bool pos_after_pad;      /* RoBERTa: position ids start at pad_token_id + 1 */
    /* Mixture of experts: "<layer>.<expert_prefix>E.<name>" is expert E's
     * tensor, named "blk.N.<gguf>.E.weight" (llama.cpp's per-expert names,
     * which the model loader reads beside the stacked ffn_*_exps). */
    const char *expert_prefix;
    const hf_name *experts;
    /* a second layout's layer prefix (NomicBERT's remote code:
     * "encoder.layers." where transformers has "layers.") */
    const char *alt_layer_prefix;
};

static const hf_name decoder_global[] = {
    {"model.embed_tokens.weight", "token_embd.weight", T_W},
    {"model.norm.weight", "output_norm.weight", T_NORM},
    {"lm_head.weight", "output.weight", T_W},
    {NULL, NULL, T_W},
};

#define ATTENTION_NAMES                                                                        \
    {"input_layernorm.weight", "attn_norm.weight", T_NORM},                                    \
        {"self_attn.q_proj.weight", "attn_q.weight", T_W},                                     \
        {"self_attn.k_proj.weight", "attn_k.weight", T_W},                                     \
        {"self_attn.v_proj.weight", "attn_v.weight", T_W},                                     \
        {"self_attn.q_proj.bias", "attn_q.bias", T_VEC},                                       \
        {"self_attn.k_proj.bias", "attn_k.bias", T_VEC},                                       \
        {"self_attn.v_proj.bias", "attn_v.bias", T_VEC},                                       \
        {"self_attn.qkv_proj.weight", "attn_qkv.weight", T_W},                                 \
        {"self_attn.q_norm.weight", "attn_q_norm.weight", T_NORM},                             \
        {"self_attn.k_norm.weight", "attn_k_norm.weight", T_NORM},                             \
        {"self_attn.o_proj.weight", "attn_output.weight", T_W},                                \
        {"mlp.gate_proj.weight", "ffn_gate.weight", T_W},                                      \
        {"mlp.up_proj.weight", "ffn_up.weight", T_W},                                          \
        {"mlp.gate_up_proj.weight", "ffn_up.weight", T_W},                                     \
        {"mlp.down_proj.weight", "ffn_down.weight", T_W}

static const hf_name llama_layer[] = {
    ATTENTION_NAMES,
    {"post_attention_layernorm.weight", "ffn_norm.weight", T_NORM},
    {NULL, NULL, T_W},
};

static const hf_name gemma_layer[] = {
    ATTENTION_NAMES,
    {"post_attention_layernorm.weight", "post_attention_norm.weight", T_NORM},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight", T_NORM},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", T_NORM},
    {NULL, NULL, T_W},
};

/* Mixtral: llama with a router and eight (here any) SwiGLU experts. */
static const hf_name mixtral_layer[] = {
    ATTENTION_NAMES,
    {"post_attention_layernorm.weight", "ffn_norm.weight", T_NORM},
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight", T_W},
    {NULL, NULL, T_W},
};

static const hf_name mixtral_experts[] = {
    {"w1.weight", "ffn_gate", T_W},
    {"w3.weight", "ffn_up", T_W},
    {"w2.weight", "ffn_down", T_W},
    {NULL, NULL, T_W},
};

/* Qwen2-MoE / Qwen3-MoE: mlp.gate routes; Qwen2-MoE's shared expert and its
 * gate as llama.cpp names them (a layer of mlp_only_layers keeps the dense
 * mlp.*_proj names of ATTENTION_NAMES). */
static const hf_name qwen_moe_layer[] = {
    ATTENTION_NAMES,
    {"post_attention_layernorm.weight", "ffn_norm.weight", T_NORM},
    {"mlp.gate.weight", "ffn_gate_inp.weight", T_W},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", T_W},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", T_W},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", T_W},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", T_W},
    {NULL, NULL, T_W},
};

/* GraniteMoE stores each layer's experts stacked: input_linear [n_expert,
 * 2 * n_ff, n_embd] holds gate then up (weights_hf.c splits it into
 * ffn_gate_exps and ffn_up_exps as llama.cpp's converter does),
 * output_linear [n_expert, n_embd, n_ff] is ffn_down_exps as it is. */
static const hf_name granitemoe_layer[] = {
    ATTENTION_NAMES,
    {"post_attention_layernorm.weight", "ffn_norm.weight", T_NORM},
    {"block_sparse_moe.router.layer.weight", "ffn_gate_inp.weight", T_W},
    {"block_sparse_moe.input_linear.weight", "ffn_gate_up_exps.weight", T_W},
    {"block_sparse_moe.output_linear.weight", "ffn_down_exps.weight", T_W},
    {NULL, NULL, T_W},
};

static const hf_name qwen_moe_experts[] = {
    {"gate_proj.weight", "ffn_gate", T_W},
    {"up_proj.weight", "ffn_up", T_W},
    {"down_proj.weight", "ffn_down", T_W},
    {NULL, NULL, T_W},
};

static const hf_key common_keys[] = {
    {"num_hidden_layers", "block_count", 'i'},
    {"hidden_size", "embedding_length", 'i'},
    {"intermediate_size", "feed_forward_length", 'i'},
    {"num_attention_heads", "attention.head_count", 'i'},
    {"num_key_value_heads", "attention.head_count_kv", 'i'},
    {"head_dim", "attention.key_length", 'i'},
    {"head_dim", "attention.value_length", 'i'},
    {"max_position_embeddings", "context_length", 'i'},
    {"rms_norm_eps", "attention.layer_norm_rms_epsilon", 'f'},
    {"rope_theta", "rope.freq_base", 'f'},
    {NULL, NULL, 0},
};

static const hf_key no_keys[] = {{NULL, NULL, 0}};

/* Sequence-classification heads in llama.cpp's names: cls = the dense
 * layer before tanh (BERT's pooler, RoBERTa's classifier.dense), cls.output
 * = the projection to the labels (BERT's classifier, RoBERTa's out_proj). */
#define ENCODER_HEAD_NAMES                                                     \
    {"pooler.dense.weight", "cls.weight", T_W}, {"pooler.dense.bias", "cls.bias", T_VEC},       \
        {"classifier.dense.weight", "cls.weight", T_W},                                        \
        {"classifier.dense.bias", "cls.bias", T_VEC},                                          \
        {"classifier.out_proj.weight", "cls.output.weight", T_W},                              \
        {"classifier.out_proj.bias", "cls.output.bias", T_VEC},                                \
        {"classifier.weight", "cls.output.weight", T_W},                                       \
        {"classifier.bias", "cls.output.bias", T_VEC}

/* BERT as transformers' BertModel names it (a task model's "bert." prefix
 * is dropped first), in llama.cpp's bert GGUF names. */
static const hf_name bert_global[] = {
    {"embeddings.word_embeddings.weight", "token_embd.weight", T_W},
    {"embeddings.position_embeddings.weight", "position_embd.weight", T_W},
    {"embeddings.token_type_embeddings.weight", "token_types.weight", T_W},
    {"embeddings.LayerNorm.weight", "token_embd_norm.weight", T_VEC},
    {"embeddings.LayerNorm.bias", "token_embd_norm.bias", T_VEC},
    ENCODER_HEAD_NAMES,
    {NULL, NULL, T_W},
};

static const hf_name bert_layer[] = {
    {"attention.self.query.weight", "attn_q.weight", T_W},
    {"attention.self.query.bias", "attn_q.bias", T_VEC},
    {"attention.self.key.weight", "attn_k.weight", T_W},
    {"attention.self.key.bias", "attn_k.bias", T_VEC},
    {"attention.self.value.weight", "attn_v.weight", T_W},
    {"attention.self.value.bias", "attn_v.bias", T_VEC},
    {"attention.output.dense.weight", "attn_output.weight", T_W},
    {"attention.output.dense.bias", "attn_output.bias", T_VEC},
    {"attention.output.LayerNorm.weight", "attn_output_norm.weight", T_VEC},
    {"attention.output.LayerNorm.bias", "attn_output_norm.bias", T_VEC},
    {"intermediate.dense.weight", "ffn_up.weight", T_W},
    {"intermediate.dense.bias", "ffn_up.bias", T_VEC},
    {"output.dense.weight", "ffn_down.weight", T_W},
    {"output.dense.bias", "ffn_down.bias", T_VEC},
    {"output.LayerNorm.weight", "layer_output_norm.weight", T_VEC},
    {"output.LayerNorm.bias", "layer_output_norm.bias", T_VEC},
    {NULL, NULL, T_W},
};

/* MPNet as transformers' MPNetModel names it ("mpnet." dropped first). */
static const hf_name mpnet_global[] = {
    {"embeddings.word_embeddings.weight", "token_embd.weight", T_W},
    {"embeddings.position_embeddings.weight", "position_embd.weight", T_W},
    {"embeddings.LayerNorm.weight", "token_embd_norm.weight", T_VEC},
    {"embeddings.LayerNorm.bias", "token_embd_norm.bias", T_VEC},
    {"encoder.relative_attention_bias.weight", "attn_rel_b.weight", T_VEC},
    ENCODER_HEAD_NAMES,
    {NULL, NULL, T_W},
};

static const hf_name mpnet_layer[] = {
    {"attention.attn.q.weight", "attn_q.weight", T_W},
    {"attention.attn.q.bias", "attn_q.bias", T_VEC},
    {"attention.attn.k.weight", "attn_k.weight", T_W},
    {"attention.attn.k.bias", "attn_k.bias", T_VEC},
    {"attention.attn.v.weight", "attn_v.weight", T_W},
    {"attention.attn.v.bias", "attn_v.bias", T_VEC},
    {"attention.attn.o.weight", "attn_output.weight", T_W},
    {"attention.attn.o.bias", "attn_output.bias", T_VEC},
    {"attention.LayerNorm.weight", "attn_output_norm.weight", T_VEC},
    {"attention.LayerNorm.bias", "attn_output_norm.bias", T_VEC},
    {"intermediate.dense.weight", "ffn_up.weight", T_W},
    {"intermediate.dense.bias", "ffn_up.bias", T_VEC},
    {"output.dense.weight", "ffn_down.weight", T_W},
    {"output.dense.bias", "ffn_down.bias", T_VEC},
    {"output.LayerNorm.weight", "layer_output_norm.weight", T_VEC},
    {"output.LayerNorm.bias", "layer_output_norm.bias", T_VEC},
    {NULL, NULL, T_W},
};

/* ModernBERT as transformers' ModernBertModel names it ("model." of a task
 * model dropped first), in llama.cpp's modern-bert names; the biases exist
 * only when config.json's attention_bias / mlp_bias / norm_bias say so. */
static const hf_name modernbert_global[] = {
    {"embeddings.tok_embeddings.weight", "token_embd.weight", T_W},
    {"embeddings.norm.weight", "token_embd_norm.weight", T_VEC},
    {"embeddings.norm.bias", "token_embd_norm.bias", T_VEC},
    {"final_norm.weight", "output_norm.weight", T_VEC},
    {"final_norm.bias", "output_norm.bias", T_VEC},
    {NULL, NULL, T_W},
};

static const hf_name modernbert_layer[] = {
    {"attn_norm.weight", "attn_norm.weight", T_VEC},
    {"attn_norm.bias", "attn_norm.bias", T_VEC},
    {"attn.Wqkv.weight", "attn_qkv.weight", T_W},
    {"attn.Wqkv.bias", "attn_qkv.bias", T_VEC},
    {"attn.Wo.weight", "attn_output.weight", T_W},
    {"attn.Wo.bias", "attn_output.bias", T_VEC},
    {"mlp_norm.weight", "ffn_norm.weight", T_VEC},
    {"mlp_norm.bias", "ffn_norm.bias", T_VEC},
    {"mlp.Wi.weight", "ffn_up.weight", T_W},
    {"mlp.Wi.bias", "ffn_up.bias", T_VEC},
    {"mlp.Wo.weight", "ffn_down.weight", T_W},
    {"mlp.Wo.bias", "ffn_down.bias", T_VEC},
    {NULL, NULL, T_W},
};

/* The Hub's ModernBERT configs (answerdotai/ModernBERT-base) hold these;
 * transformers 5 saves layer_types and rope_parameters instead, which
 * map_layer_types and map_rope read. */
static const hf_key modernbert_keys[] = {
    {"norm_eps", "attention.layer_norm_epsilon", 'f'},
    {"local_attention", "attention.sliding_window", 'i'},
    {"global_attn_every_n_layers", "attention.sliding_window_pattern", 'i'},
    {"global_rope_theta", "rope.freq_base", 'f'},
    {"local_rope_theta", "rope.freq_base_swa", 'f'},
    {NULL, NULL, 0},
};

/* NomicBERT in both layouts: transformers' NomicBertModel (layers.N.self_attn.*,
 * mlp.*_proj) and the Hub's remote code that nomic-embed-text ships
 * (encoder.layers.N.attn.Wqkv, mlp.fc11 = up, fc12 = gate, fc2, norm1/norm2,
 * emb_ln), in llama.cpp's nomic-bert names. */
static const hf_name nomicbert_global[] = {
    {"embeddings.word_embeddings.weight", "token_embd.weight", T_W},
    {"embeddings.token_type_embeddings.weight", "token_types.weight", T_W},
    {"embeddings.LayerNorm.weight", "token_embd_norm.weight", T_VEC},
    {"embeddings.LayerNorm.bias", "token_embd_norm.bias", T_VEC},
    {"emb_ln.weight", "token_embd_norm.weight", T_VEC},
    {"emb_ln.bias", "token_embd_norm.bias", T_VEC},
    ENCODER_HEAD_NAMES,
    {NULL, NULL, T_W},
};

static const hf_name nomicbert_layer[] = {
    {"self_attn.q_proj.weight", "attn_q.weight", T_W},
    {"self_attn.k_proj.weight", "attn_k.weight", T_W},
    {"self_attn.v_proj.weight", "attn_v.weight", T_W},
    {"self_attn.o_proj.weight", "attn_output.weight", T_W},
    {"post_attention_layernorm.weight", "attn_output_norm.weight", T_VEC},
    {"post_attention_layernorm.bias", "attn_output_norm.bias", T_VEC},
    {"mlp.gate_proj.weight", "ffn_gate.weight", T_W},
    {"mlp.up_proj.weight", "ffn_up.weight", T_W},
    {"mlp.down_proj.weight", "ffn_down.weight", T_W},
    {"post_mlp_layernorm.weight", "layer_output_norm.weight", T_VEC},
    {"post_mlp_layernorm.bias", "layer_output_norm.bias", T_VEC},
    {"attn.Wqkv.weight", "attn_qkv.weight", T_W},
    {"attn.out_proj.weight", "attn_output.weight", T_W},
    {"norm1.weight", "attn_output_norm.weight", T_VEC},
    {"norm1.bias", "attn_output_norm.bias", T_VEC},
    {"mlp.fc11.weight", "ffn_up.weight", T_W},
    {"mlp.fc12.weight", "ffn_gate.weight", T_W},
    {"mlp.fc2.weight", "ffn_down.weight", T_W},
    {"norm2.weight", "layer_output_norm.weight", T_VEC},
    {"norm2.bias", "layer_output_norm.bias", T_VEC},
    {NULL, NULL, T_W},
};

/* The remote code's GPT-2-style names beside transformers' (common_keys). */
static const hf_key nomicbert_keys[] = {
    {"layer_norm_eps", "attention.layer_norm_epsilon", 'f'},
    {"layer_norm_epsilon", "attention.layer_norm_epsilon", 'f'},
    {"n_layer", "block_count", 'i'},
    {"n_embd", "embedding_length", 'i'},
    {"n_inner", "feed_forward_length", 'i'},
    {"n_head", "attention.head_count", 'i'},
    {"n_positions", "context_length", 'i'},
    {"rotary_emb_base", "rope.freq_base", 'f'},
    {NULL, NULL, 0},
};

static const hf_key bert_keys[] = {
    {"layer_norm_eps", "attention.layer_norm_epsilon", 'f'},
    {NULL, NULL, 0},
};

/* Mistral and Phi-3 attend within a window in every layer when they have one. */
static const hf_key window_keys[] = {
    {"sliding_window", "attention.sliding_window", 'i'},
    {NULL, NULL, 0},
};

static const hf_key mixtral_keys[] = {
    {"sliding_window", "attention.sliding_window", 'i'},
    {"num_local_experts", "expert_count", 'i'},
    {"num_experts_per_tok", "expert_used_count", 'i'},
    {NULL, NULL, 0},
};

/* Qwen configs spell the count num_experts (transformers 5 also saves
 * num_local_experts); intermediate_size is the dense layers' width. */
static const hf_key qwen_moe_keys[] = {
    {"num_experts", "expert_count", 'i'},
    {"num_local_experts", "expert_count", 'i'},
    {"num_experts_per_tok", "expert_used_count", 'i'},
    {"moe_intermediate_size", "expert_feed_forward_length", 'i'},
    {"shared_expert_intermediate_size", "expert_shared_feed_forward_length", 'i'},
    {"norm_topk_prob", "expert_weights_norm", 'b'},
    {NULL, NULL, 0},
};

#define GRANITE_KEYS                                                                   \
    {"embedding_multiplier", "embedding_scale", 'f'},                                           \
        {"residual_multiplier", "residual_scale", 'f'},                                         \
        {"attention_multiplier", "attention.scale", 'f'},                                       \
        {"logits_scaling", "logit_scale", 'f'}

static const hf_key granite_keys[] = {
    GRANITE_KEYS,
    {NULL, NULL, 0},
};

static const hf_key granitemoe_keys[] = {
    {"num_local_experts", "expert_count", 'i'},
    {"num_experts_per_tok", "expert_used_count", 'i'},
    GRANITE_KEYS,
    {NULL, NULL, 0},
};
#undef GRANITE_KEYS

static const hf_key gemma2_keys[] = {
    {"sliding_window", "attention.sliding_window", 'i'},
    {"attn_logit_softcapping", "attn_logit_softcapping", 'f'},
    {"final_logit_softcapping", "final_logit_softcapping", 'f'},
    {"query_pre_attn_scalar", "attention.query_pre_attn_scalar", 'f'},
    {NULL, NULL, 0},
};

static const hf_key gemma3_keys[] = {
    {"sliding_window", "attention.sliding_window", 'i'},
    {"rope_local_base_freq", "rope.freq_base_swa", 'f'},
    {"sliding_window_pattern", "attention.sliding_window_pattern", 'i'},
    {"query_pre_attn_scalar", "attention.query_pre_attn_scalar", 'f'},
    {"attn_logit_softcapping", "attn_logit_softcapping", 'f'},
    {"final_logit_softcapping", "final_logit_softcapping", 'f'},
    {NULL, NULL, 0},
};

static const hf_family families[] = {
#define DECODER decoder_global, "model.layers."
    {"llama", "llama", DECODER, llama_layer, window_keys, false, "hidden_act", "silu", NULL, false, NULL, NULL, NULL},
    {"mistral", "llama", DECODER, llama_layer, window_keys, false, "hidden_act", "silu", NULL, false, NULL, NULL, NULL},
    {"qwen2", "qwen2", DECODER, llama_layer, no_keys, false, "hidden_act", "silu", NULL, false, NULL, NULL, NULL},
    {"qwen3", "qwen3", DECODER, llama_layer, no_keys, false, "hidden_act", "silu", NULL, false, NULL, NULL, NULL},
    {"mixtral", "llama", DECODER, mixtral_layer, mixtral_keys, false, "hidden_act", "silu", NULL, false,
     "block_sparse_moe.experts.", mixtral_experts, NULL},
    {"qwen2_moe", "qwen2moe", DECODER, qwen_moe_layer, qwen_moe_keys, false, "hidden_act", "silu", NULL,
     false, "mlp.experts.", qwen_moe_experts, NULL},
    {"qwen3_moe", "qwen3moe", DECODER, qwen_moe_layer, qwen_moe_keys, false, "hidden_act", "silu", NULL,
     false, "mlp.experts.", qwen_moe_experts, NULL},
    /* OLMoE names its tensors as Qwen-MoE does; q_norm/k_norm span the whole projection */
    {"olmoe", "olmoe", DECODER, qwen_moe_layer, qwen_moe_keys, false, "hidden_act", "silu", NULL, false,
     "mlp.experts.", qwen_moe_experts, NULL},
    {"granite", "granite", DECODER, llama_layer, granite_keys, false, "hidden_act", "silu", NULL, false,
     NULL, NULL, NULL},
    {"granitemoe", "granitemoe", DECODER, granitemoe_layer, granitemoe_keys, false, "hidden_act", "silu",
     NULL, false, NULL, NULL, NULL},
    {"phi3", "phi3", DECODER, llama_layer, window_keys, false, "hidden_act", "silu", NULL, false, NULL, NULL, NULL},
    {"gemma2", "gemma2", DECODER, gemma_layer, gemma2_keys, true, "hidden_activation",
     "gelu_pytorch_tanh", NULL, false, NULL, NULL, NULL},
    {"gemma3_text", "gemma3", DECODER, gemma_layer, gemma3_keys, true, "hidden_activation",
     "gelu_pytorch_tanh", NULL, false, NULL, NULL, NULL},
    {"bert", "bert", bert_global, "encoder.layer.", bert_layer, bert_keys, false, "hidden_act", "gelu", NULL, false, NULL, NULL, NULL},
    /* llama.cpp converts both as bert, with the position rows before
     * pad_token_id + 1 dropped; here they stay and candle.position_offset
     * says where position 0 is */
    {"roberta", "bert", bert_global, "encoder.layer.", bert_layer, bert_keys, false, "hidden_act", "gelu",
     "roberta", true, NULL, NULL, NULL},
    {"xlm-roberta", "bert", bert_global, "encoder.layer.", bert_layer, bert_keys, false, "hidden_act", "gelu",
     "roberta", true, NULL, NULL, NULL},
    /* positions from MPNetEmbeddings' fixed padding_idx 1 + 1 */
    {"mpnet", "mpnet", mpnet_global, "encoder.layer.", mpnet_layer, bert_keys, false, "hidden_act", "gelu", NULL, true, NULL, NULL, NULL},
    {"nomic_bert", "nomic-bert", nomicbert_global, "layers.", nomicbert_layer, nomicbert_keys, false,
     "hidden_act", "silu", "nomic_bert", false, NULL, NULL, "encoder.layers."},
    /* hidden_activation "gelu" is transformers' GELUActivation: erf */
    {"modernbert", "modern-bert", modernbert_global, "layers.", modernbert_layer, modernbert_keys, false,
     "hidden_activation", "gelu", "model", false, NULL, NULL, NULL},
#undef DECODER
};
#define N_FAMILIES (sizeof families / sizeof families[0])

const hf_family *hf_family_find(const char *model_type, size_t len) {
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (strlen(families[i].model_type) == len && !memcmp(families[i].model_type, model_type, len))
            return &families[i];
    return NULL;
}

const char *hf_family_model_type(const hf_family *f) { return f->model_type; }

const char *hf_family_list(void) {
    return "llama, mistral, mixtral, qwen2, qwen3, qwen2_moe, qwen3_moe, olmoe, granite, granitemoe, "
           "phi3, gemma2, gemma3_text, bert, roberta, xlm-roberta, mpnet, modernbert, nomic_bert";
}

static candle_status bad_field(const char *file, const char *field, const char *want,
                               const json_value *v) {
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: field '%s' is %s, want %s", file, field,
                            json_type_name(v->type), want);
}

/* One config field as `<arch>.<key>`; absent and null fields are skipped. */
static candle_status map_key(candle_weights *w, const hf_family *f, const json_value *cfg,
                             const hf_key *k, const char *file) {
    const json_value *v = json_get(cfg, k->hf);
    if (!v || v->type == JSON_NULL) return CANDLE_OK;
    char key[128];
    snprintf(key, sizeof key, "%s.%s", f->arch, k->gguf);
    int64_t i;
    double d;
    bool b;
    if (k->type == 'b') {
        if (!json_as_bool(v, &b)) return bad_field(file, k->hf, "a boolean", v);
        return weights_add_bool(w, key, b);
    }
    if (k->type == 'i') {
        if (!json_as_i64(v, &i) || i < 0) return bad_field(file, k->hf, "a non-negative integer", v);
        return weights_add_i64(w, key, i);
    }
    if (!json_as_f64(v, &d) || !isfinite(d)) return bad_field(file, k->hf, "a finite number", v);
    return weights_add_f64(w, key, d);
}

static candle_status add_arch_f64(candle_weights *w, const hf_family *f, const char *key, double v) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", f->arch, key);
    return weights_add_f64(w, k, v);
}

/* What a scaling reads beside its object: config.json's root, its theta,
 * the rotated dims and the object's name in messages. */
typedef struct rope_ctx {
    candle_weights *w;
    const hf_family *f;
    const json_value *rs, *cfg;
    const char *file, *field;
    double theta;
    int64_t dim;
} rope_ctx;

static double num_or(const json_value *v, double def) {
    double d;
    return v && json_as_f64(v, &d) ? d : def;
}

/* A number of the rope object, or its default. */
static double rope_num(const rope_ctx *r, const char *name, double def) {
    return num_or(json_get(r->rs, name), def);
}

/* The context the scaling was trained on: Phi-3 keeps it at the root of
 * config.json (transformers gives the root's priority), others in the
 * object; else max_position_embeddings. */
static double rope_orig_ctx(const rope_ctx *r) {
    double max_pos = num_or(json_get(r->cfg, "max_position_embeddings"), 0);
    const json_value *root = json_get(r->cfg, "original_max_position_embeddings");
    if (root && root->type != JSON_NULL) return num_or(root, max_pos);
    return rope_num(r, "original_max_position_embeddings", max_pos);
}

/* The rotated dims as transformers counts them: head_dim (or hidden /
 * heads) times partial_rotary_factor. */
static int64_t rope_dims(const json_value *cfg) {
    int64_t hd = 0, embd = 0, heads = 0;
    if (!json_as_i64(json_get(cfg, "head_dim"), &hd) &&
        json_as_i64(json_get(cfg, "hidden_size"), &embd) &&
        json_as_i64(json_get(cfg, "num_attention_heads"), &heads) && heads > 0)
        hd = embd / heads;
    return (int64_t)((double)hd * num_or(json_get(cfg, "partial_rotary_factor"), 1.0));
}

static candle_status rope_key(const rope_ctx *r, const char *key, double v) {
    return add_arch_f64(r->w, r->f, key, v);
}

/* The original context is an integer key in GGUF (llama.cpp reads a u32). */
static candle_status rope_orig_key(const rope_ctx *r, double orig) {
    char k[128];
    snprintf(k, sizeof k, "%s.rope.scaling.original_context_length", r->f->arch);
    if (!(orig >= 1 && orig <= 1e12 && orig == floor(orig)))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "%s: %s: original_max_position_embeddings %g is not a positive "
                                "integer", r->file, r->field, orig);
    return weights_add_i64(r->w, k, (int64_t)orig);
}

/* Llama 3.1: wavelengths below original / high_freq_factor keep their
 * frequency, those above original / low_freq_factor are divided by factor,
 * and the ones between blend smoothly; given as the divisors
 * rope_freqs.weight, as llama.cpp's converter writes them. */
static candle_status rope_llama3(const rope_ctx *r) {
    double factor = rope_num(r, "factor", 8), lo = rope_num(r, "low_freq_factor", 1);
    double hi = rope_num(r, "high_freq_factor", 4), orig = rope_num(r, "original_max_position_embeddings", 8192);
    float ff[512];
    if (r->dim <= 0 || r->dim / 2 > 512 || !(factor > 0) || !(orig > 0) || !(lo > 0) || !(hi > lo))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "%s: %s: llama3 scaling needs factor > 0, original_max_position_"
                                "embeddings > 0 and 0 < low_freq_factor < high_freq_factor "
                                "(rotary dims %lld)", r->file, r->field, (long long)r->dim);
    for (int64_t i = 0; i < r->dim / 2; i++) {
        double wavelen = 2 * 3.14159265358979323846 / pow(r->theta, -2.0 * (double)i / (double)r->dim);
        double smooth = (orig / wavelen - lo) / (hi - lo);
        ff[i] = wavelen < orig / hi ? 1.0f
                : wavelen > orig / lo ? (float)factor
                                      : (float)(1.0 / ((1 - smooth) / factor + smooth));
    }
    candle_status s = rope_key(r, "rope.scaling.factor", factor);
    if (!s) s = rope_key(r, "rope.scaling.low_freq_factor", lo);
    if (!s) s = rope_key(r, "rope.scaling.high_freq_factor", hi);
    if (!s) s = rope_orig_key(r, orig);
    return s ? s : weights_add_made(r->w, "rope_freqs.weight", ff, r->dim / 2);
}

/* YaRN in the GGUF keys llama.cpp's converter writes; the attention factor
 * as transformers computes it (given, or from mscale / mscale_all_dim; else
 * left to the model's default 0.1 ln(factor) + 1). */
static candle_status rope_yarn(const rope_ctx *r) {
    double orig = rope_orig_ctx(r), max_pos = num_or(json_get(r->cfg, "max_position_embeddings"), 0);
    double factor = rope_num(r, "factor", orig > 0 ? max_pos / orig : 0);
    double ms = rope_num(r, "mscale", 0), ms_all = rope_num(r, "mscale_all_dim", 0);
    const json_value *trunc = json_get(r->rs, "truncate");
    if (trunc && trunc->type == JSON_FALSE)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "%s: %s: YaRN with truncate false is not supported", r->file, r->field);
    candle_status s = rope_key(r, "rope.scaling.factor", factor);
    if (!s) s = rope_orig_key(r, orig);
    if (!s && json_get(r->rs, "beta_fast"))
        s = rope_key(r, "rope.scaling.yarn_beta_fast", rope_num(r, "beta_fast", 32));
    if (!s && json_get(r->rs, "beta_slow"))
        s = rope_key(r, "rope.scaling.yarn_beta_slow", rope_num(r, "beta_slow", 1));
    const json_value *af = json_get(r->rs, "attention_factor");
    if (!s && af && af->type != JSON_NULL)
        s = rope_key(r, "rope.scaling.yarn_attn_factor", num_or(af, 1));
    else if (!s && ms != 0 && ms_all != 0 && factor > 1)
        s = rope_key(r, "rope.scaling.yarn_attn_factor",
                     (0.1 * ms * log(factor) + 1) / (0.1 * ms_all * log(factor) + 1));
    return s;
}

static candle_status rope_factor_list(const rope_ctx *r, const char *field, const char *name) {
    const json_value *a = json_get(r->rs, field);
    float ff[512];
    bool ok = a && a->type == JSON_ARRAY && r->dim > 0 && a->n == (size_t)(r->dim / 2) && a->n <= 512;
    for (size_t i = 0; ok && i < a->n; i++) {
        double d;
        ok = json_as_f64(json_at(a, i), &d) && d > 0 && isfinite(d);
        ff[i] = (float)d;
    }
    if (!ok)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "%s: %s.%s must be %lld positive numbers (half the rotary dims)",
                                r->file, r->field, field, (long long)(r->dim / 2));
    return weights_add_made(r->w, name, ff, r->dim / 2);
}

/* Phi-3 long-rope ("su"): the short and long divisor lists as the tensors
 * llama.cpp's converter writes, the original context and the magnitude
 * transformers computes (attention_factor, else sqrt(1 + ln s / ln orig)
 * with s = factor or max_position_embeddings / original). */
static candle_status rope_longrope(const rope_ctx *r) {
    double orig = rope_orig_ctx(r), max_pos = num_or(json_get(r->cfg, "max_position_embeddings"), 0);
    double factor = rope_num(r, "factor", orig > 0 ? max_pos / orig : 0);
    double attn = factor > 1 && orig > 1 ? sqrt(1 + log(factor) / log(orig)) : 1.0;
    const json_value *af = json_get(r->rs, "attention_factor");
    if (af && af->type != JSON_NULL) attn = num_or(af, attn);
    candle_status s = rope_factor_list(r, "short_factor", "rope_factors_short.weight");
    if (!s) s = rope_factor_list(r, "long_factor", "rope_factors_long.weight");
    if (!s) s = rope_orig_key(r, orig);
    return s ? s : rope_key(r, "rope.scaling.attn_factor", attn);
}

/* One RoPE description: {rope_type | type, factor, rope_theta, ...}.
 * Linear, llama3, yarn and longrope/su are given as GGUF gives them (keys
 * `<arch>.rope.scaling.*` and the tensors llama.cpp's converter makes);
 * every other type is passed on by name for the architecture to refuse.
 * `field` names it in messages. */
static candle_status map_rope_object(candle_weights *w, const hf_family *f, const json_value *rs,
                                     const json_value *cfg, const char *field, const char *file,
                                     bool sliding) {
    if (rs->type != JSON_OBJECT) return bad_field(file, field, "an object", rs);
    const json_value *type = json_get(rs, "rope_type");
    if (!type) type = json_get(rs, "type");
    const char *t = "default";
    size_t len = 7;
    if (type && !json_as_str(type, &t, &len)) return bad_field(file, field, "an object with a string rope_type", rs);
    double theta;
    candle_status s = CANDLE_OK;
    if (json_as_f64(json_get(rs, "rope_theta"), &theta))
        s = add_arch_f64(w, f, sliding ? "rope.freq_base_swa" : "rope.freq_base", theta);
    if (s || (len == 7 && !memcmp(t, "default", 7))) return s;
    if (sliding)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "%s: %s: RoPE scaling '%.*s' of sliding-window layers is not supported",
                                file, field, (int)(len > 32 ? 32 : len), t);
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", f->arch);
    if ((s = weights_add_str(w, key, t, len))) return s;
    rope_ctx r = {w, f, rs, cfg, file, field, 10000.0, rope_dims(cfg)};
    r.theta = num_or(json_get(rs, "rope_theta"), num_or(json_get(cfg, "rope_theta"), 10000.0));
    if (len == 6 && !memcmp(t, "llama3", 6)) return rope_llama3(&r);
    if (len == 4 && !memcmp(t, "yarn", 4)) return rope_yarn(&r);
    if ((len == 8 && !memcmp(t, "longrope", 8)) || (len == 2 && !memcmp(t, "su", 2)))
        return rope_longrope(&r);
    double factor;
    if (json_as_f64(json_get(rs, "factor"), &factor)) s = add_arch_f64(w, f, "rope.scaling.factor", factor);
    return s;
}

/* rope_scaling (+ rope_theta, a common key) in the Hub's older layout;
 * rope_parameters in transformers 5's, one object or one per layer type. */
static candle_status map_rope(candle_weights *w, const hf_family *f, const json_value *cfg,
                              const char *file) {
    const json_value *rs = json_get(cfg, "rope_scaling");
    if (rs && rs->type != JSON_NULL) return map_rope_object(w, f, rs, cfg, "rope_scaling", file, false);
    const json_value *rp = json_get(cfg, "rope_parameters");
    if (!rp || rp->type == JSON_NULL) return CANDLE_OK;
    const json_value *full = json_get(rp, "full_attention"), *swa = json_get(rp, "sliding_attention");
    if (!full && !swa) return map_rope_object(w, f, rp, cfg, "rope_parameters", file, false);
    candle_status s = CANDLE_OK;
    if (full) s = map_rope_object(w, f, full, cfg, "rope_parameters.full_attention", file, false);
    if (!s && swa) s = map_rope_object(w, f, swa, cfg, "rope_parameters.sliding_attention", file, true);
    return s;
}

/* ModernBERT's layer_types: full attention in layers 0, N, 2N, ... (the
 * first full layer after 0 gives N; one layer: N = 1). */
static candle_status map_layer_types_from_first(candle_weights *w, const hf_family *f, const json_value *lt,
                                                const char *file) {
    int64_t period = 0;
    for (size_t i = 1; i < lt->n && !period; i++)
        if (json_str_eq(json_at(lt, i), "full_attention")) period = (int64_t)i;
    if (!period) period = (int64_t)lt->n + 1;
    for (size_t i = 0; i < lt->n; i++) {
        bool full = json_str_eq(json_at(lt, i), "full_attention");
        if (!full && !json_str_eq(json_at(lt, i), "sliding_attention"))
            return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                    "%s: layer_types[%zu] is not 'full_attention' or 'sliding_attention'",
                                    file, i);
        if (full != ((int64_t)i % period == 0))
            return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                    "%s: layer_types is not full attention every %lld layers from layer 0 "
                                    "(layer %zu)", file, (long long)period, i);
    }
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", f->arch);
    if (weights_find_kv(w, key)) return CANDLE_OK;
    return weights_add_i64(w, key, period);
}

/* layer_types (newer transformers) as the period of its full-attention
 * layers; a pattern that is not periodic cannot be described that way. */
static candle_status map_layer_types(candle_weights *w, const hf_family *f, const json_value *cfg,
                                     const char *file) {
    const json_value *lt = json_get(cfg, "layer_types");
    if (!lt || lt->type == JSON_NULL || !strcmp(f->arch, "gemma2")) return CANDLE_OK;
    if (lt->type != JSON_ARRAY) return bad_field(file, "layer_types", "an array", lt);
    if (!strcmp(f->arch, "modern-bert")) return map_layer_types_from_first(w, f, lt, file);
    int64_t period = 0;
    for (size_t i = 0; i < lt->n; i++) {
        bool full = json_str_eq(json_at(lt, i), "full_attention");
        if (!full && !json_str_eq(json_at(lt, i), "sliding_attention"))
            return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                    "%s: layer_types[%zu] is not 'full_attention' or "
                                    "'sliding_attention'", file, i);
        if (full && !period) period = (int64_t)i + 1;
        bool want_full = period ? (int64_t)(i + 1) % period == 0 : false;
        if (period && full != want_full)
            return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                    "%s: layer_types is not one full-attention layer every %lld "
                                    "layers (layer %zu)", file, (long long)period, i);
    }
    if (!period) period = (int64_t)lt->n + 1; /* sliding everywhere */
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", f->arch);
    if (weights_find_kv(w, key)) return CANDLE_OK;
    return weights_add_i64(w, key, period);
}

/* RoBERTa numbers positions from padding_idx + 1 (transformers'
 * create_position_ids_from_input_ids; inputs here hold no padding). */
static candle_status map_pos_offset(candle_weights *w, const hf_family *f, const json_value *cfg,
                                    const char *file) {
    int64_t pad = 1; /* RobertaConfig's default; MPNet's always */
    const json_value *v = strcmp(f->model_type, "mpnet") ? json_get(cfg, "pad_token_id") : NULL;
    if (v && v->type != JSON_NULL && (!json_as_i64(v, &pad) || pad < 0 || pad > (1 << 20)))
        return bad_field(file, "pad_token_id", "a small non-negative integer", v);
    return weights_add_i64(w, "candle.position_offset", pad + 1);
}

/* NomicBERT's remote-code config: what this builder computes (post-norm,
 * SwiGLU, unbiased projections, RoPE pairs (i, i + d/2)), and the rotated
 * fraction as rope.dimension_count. */
static candle_status map_nomic_remote(candle_weights *w, const json_value *cfg, const char *file) {
    static const struct { const char *field; bool want; } flags[] = {
        {"prenorm", false}, {"rotary_emb_interleaved", false}, {"qkv_proj_bias", false},
        {"mlp_fc1_bias", false}, {"mlp_fc2_bias", false}, {"causal", false}, {"use_rms_norm", false},
        {"parallel_block", false},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        const json_value *v = json_get(cfg, flags[i].field);
        bool b;
        if (!v || v->type == JSON_NULL) continue;
        if (!json_as_bool(v, &b)) return bad_field(file, flags[i].field, "a boolean", v);
        if (b != flags[i].want)
            return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: nomic_bert with %s %s is not supported",
                                    file, flags[i].field, b ? "true" : "false");
    }
    const json_value *act = json_get(cfg, "activation_function");
    if (act && act->type != JSON_NULL && !json_str_eq(act, "swiglu"))
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "%s: nomic_bert activation_function other than 'swiglu' is not supported", file);
    /* xPos (scale_base) and dynamic NTK past max_trained_positions (rotary_scaling_factor) */
    static const char *const rope_extras[] = {"rotary_emb_scale_base", "rotary_scaling_factor"};
    for (size_t i = 0; i < 2; i++) {
        const json_value *v = json_get(cfg, rope_extras[i]);
        if (v && v->type != JSON_NULL)
            return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: nomic_bert %s is not supported", file,
                                    rope_extras[i]);
    }
    const json_value *fr = json_get(cfg, "rotary_emb_fraction");
    double frac;
    int64_t embd, heads;
    if (!fr || fr->type == JSON_NULL) return CANDLE_OK;
    if (!json_as_f64(fr, &frac) || !(frac > 0 && frac <= 1))
        return bad_field(file, "rotary_emb_fraction", "a number in (0, 1]", fr);
    if (!json_as_i64(json_get(cfg, "n_embd"), &embd) || !json_as_i64(json_get(cfg, "n_head"), &heads) || heads <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: rotary_emb_fraction without n_embd and n_head", file);
    return weights_add_i64(w, "nomic-bert.rope.dimension_count", (int64_t)((double)(embd / heads) * frac));
}

/* Gemma 3's use_bidirectional_attention (EmbeddingGemma) as llama.cpp's
 * attention.causal false; no other family here computes it. */
static candle_status map_bidirectional(candle_weights *w, const hf_family *f, const json_value *cfg,
                                       const char *file) {
    const json_value *v = json_get(cfg, "use_bidirectional_attention");
    bool b;
    if (!v || v->type == JSON_NULL) return CANDLE_OK;
    if (!json_as_bool(v, &b)) return bad_field(file, "use_bidirectional_attention", "a boolean", v);
    if (!b) return CANDLE_OK;
    if (strcmp(f->arch, "gemma3"))
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: use_bidirectional_attention true is not "
                                "supported for %s", file, f->model_type);
    char key[128];
    snprintf(key, sizeof key, "%s.attention.causal", f->arch);
    return weights_add_bool(w, key, false);
}

candle_status hf_family_config(const hf_family *f, candle_weights *w, const json_value *cfg,
                               const char *file) {
    candle_status s = weights_add_str(w, "general.architecture", f->arch, strlen(f->arch));
    if (!s && !strcmp(f->arch, "nomic-bert")) s = map_nomic_remote(w, cfg, file);
    for (const hf_key *k = common_keys; !s && k->hf; k++) s = map_key(w, f, cfg, k, file);
    for (const hf_key *k = f->keys; !s && k->hf; k++) s = map_key(w, f, cfg, k, file);
    if (!s) s = map_rope(w, f, cfg, file);
    if (!s) s = map_layer_types(w, f, cfg, file);
    if (!s) s = map_bidirectional(w, f, cfg, file);
    if (s) return s;
    const json_value *prf = json_get(cfg, "partial_rotary_factor");
    double factor;
    if (prf && prf->type != JSON_NULL) {
        int64_t heads, embd, hd;
        char key[128];
        if (!json_as_f64(prf, &factor) || !(factor > 0 && factor <= 1))
            return bad_field(file, "partial_rotary_factor", "a number in (0, 1]", prf);
        snprintf(key, sizeof key, "%s.attention.key_length", f->arch);
        if (!candle_weights_get_i64(w, key, &hd)) {
            if (!json_as_i64(json_get(cfg, "hidden_size"), &embd) ||
                !json_as_i64(json_get(cfg, "num_attention_heads"), &heads) || heads <= 0)
                return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                        "%s: partial_rotary_factor without hidden_size and "
                                        "num_attention_heads", file);
            hd = embd / heads;
        }
        snprintf(key, sizeof key, "%s.rope.dimension_count", f->arch);
        if ((s = weights_add_i64(w, key, (int64_t)(hd * factor)))) return s;
    }
    if (f->pos_after_pad && (s = map_pos_offset(w, f, cfg, file))) return s;
    /* OLMoE's optional clamp of q, k and v (null in the released models) */
    const json_value *clip = json_get(cfg, "clip_qkv");
    if (clip && clip->type != JSON_NULL)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: clip_qkv is not supported (want null)",
                                file);
    const json_value *pet = json_get(cfg, "position_embedding_type");
    if (pet && pet->type != JSON_NULL && !json_str_eq(pet, "absolute"))
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "%s: position_embedding_type %s is not supported (only 'absolute')",
                                file, pet->type == JSON_STRING ? pet->u.str : json_type_name(pet->type));
    const json_value *act = json_get(cfg, f->act_field);
    if (act && act->type != JSON_NULL && !json_str_eq(act, f->act)) {
        const char *a = "?";
        size_t len = 1;
        json_as_str(act, &a, &len);
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "%s: %s '%.*s' is not supported for %s (want '%s')", file,
                                f->act_field, (int)(len > 64 ? 64 : len), a, f->model_type, f->act);
    }
    return CANDLE_OK;
}

static weights_xform xform_of(const hf_family *f, tkind k) {
    if (k == T_NORM) return f->norm_plus_one ? XF_ADD_ONE : XF_F32;
    return k == T_VEC ? XF_F32 : XF_NONE;
}

/* "<prefix>12.rest" -> 12 and rest; false for other names. */
static bool split_layer(const char *name, const char *prefix, long *il, const char **rest) {
    size_t np = strlen(prefix);
    if (strncmp(name, prefix, np)) return false;
    const char *p = name + np;
    char *end;
    if (*p < '0' || *p > '9') return false;
    *il = strtol(p, &end, 10);
    if (*end != '.' || *il < 0 || *il > 100000) return false;
    *rest = end + 1;
    return true;
}

static bool family_tensor(const hf_family *f, const char *src, char *buf, size_t n, weights_xform *xf);

bool hf_family_tensor(const hf_family *f, const char *src, char *buf, size_t n,
                      weights_xform *xf) {
    if (family_tensor(f, src, buf, n, xf)) return true;
    /* a decoder's base model saved alone (Qwen3Model in a sentence-transformers
     * folder such as Qwen3-Embedding's) lacks the "model." of its
     * ...ForCausalLM checkpoint */
    char full[256];
    if (strncmp(f->layer_prefix, "model.", 6) || !strncmp(src, "model.", 6) || strlen(src) >= sizeof full - 6)
        return false;
    snprintf(full, sizeof full, "model.%s", src);
    return family_tensor(f, full, buf, n, xf);
}

static bool family_tensor(const hf_family *f, const char *src, char *buf, size_t n, weights_xform *xf) {
    long il;
    const char *rest;
    /* a task model (BertForSequenceClassification, ...) holds the base
     * model under its own name */
    const char *pre = f->task_prefix ? f->task_prefix : f->model_type;
    size_t na = strlen(pre);
    if (!strncmp(src, pre, na) && src[na] == '.') src += na + 1;
    if (split_layer(src, f->layer_prefix, &il, &rest) ||
        (f->alt_layer_prefix && split_layer(src, f->alt_layer_prefix, &il, &rest))) {
        long ie;
        const char *er;
        if (f->expert_prefix && split_layer(rest, f->expert_prefix, &ie, &er)) {
            for (const hf_name *t = f->experts; t->hf; t++)
                if (!strcmp(t->hf, er)) {
                    snprintf(buf, n, "blk.%ld.%s.%ld.weight", il, t->gguf, ie);
                    *xf = xform_of(f, t->kind);
                    return true;
                }
            return false;
        }
        for (const hf_name *t = f->layer; t->hf; t++)
            if (!strcmp(t->hf, rest)) {
                snprintf(buf, n, "blk.%ld.%s", il, t->gguf);
                *xf = xform_of(f, t->kind);
                return true;
            }
        return false;
    }
    for (const hf_name *t = f->global; t->hf; t++)
        if (!strcmp(t->hf, src)) {
            snprintf(buf, n, "%s", t->gguf);
            *xf = xform_of(f, t->kind);
            return true;
        }
    return false;
}

bool hf_family_src_name(const hf_family *f, const char *gguf_name, char *buf, size_t n) {
    long il;
    char *end;
    if (!strncmp(gguf_name, "blk.", 4) && gguf_name[4] >= '0' && gguf_name[4] <= '9') {
        il = strtol(gguf_name + 4, &end, 10);
        if (*end != '.') return false;
        /* stacked experts "ffn_gate_exps.weight": every expert's tensor */
        for (const hf_name *t = f->experts; t && t->hf; t++) {
            size_t ng = strlen(t->gguf);
            if (!strncmp(end + 1, t->gguf, ng) && !strcmp(end + 1 + ng, "_exps.weight")) {
                snprintf(buf, n, "%s%ld.%s*.%s", f->layer_prefix, il, f->expert_prefix, t->hf);
                return true;
            }
        }
        /* an expert's "ffn_gate.E.weight" */
        for (const hf_name *t = f->experts; t && t->hf; t++) {
            size_t ng = strlen(t->gguf);
            char *e2;
            if (strncmp(end + 1, t->gguf, ng) || end[1 + ng] != '.' || end[2 + ng] < '0' ||
                end[2 + ng] > '9')
                continue;
            long ie = strtol(end + 2 + ng, &e2, 10);
            if (strcmp(e2, ".weight")) continue;
            snprintf(buf, n, "%s%ld.%s%ld.%s", f->layer_prefix, il, f->expert_prefix, ie, t->hf);
            return true;
        }
        /* fused and split projections share a GGUF name: the first listed
         * is the one the family's checkpoints have when neither exists */
        for (const hf_name *t = f->layer; t->hf; t++)
            if (!strcmp(t->gguf, end + 1)) {
                snprintf(buf, n, "%s%ld.%s", f->layer_prefix, il, t->hf);
                return true;
            }
        return false;
    }
    for (const hf_name *t = f->global; t->hf; t++)
        if (!strcmp(t->gguf, gguf_name)) {
            snprintf(buf, n, "%s", t->hf);
            return true;
        }
    return false;
}

bool hf_family_ignored(const char *src) {
    size_t n = strlen(src);
    static const char suffix[] = ".rotary_emb.inv_freq";
    if (n >= sizeof suffix - 1 && !strcmp(src + n - (sizeof suffix - 1), suffix)) return true;
    /* the position-id buffer older checkpoints saved (BERT's pooler is
     * mapped: a classifier uses it, a sentence embedder leaves it unread) */
    return strstr(src, "embeddings.position_ids");
}
