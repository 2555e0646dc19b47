/* Byte-level alphabet and the pre-tokenizer split of each BPE family.
 *
 * The patterns are those the families' reference tokenizers publish
 * (Hugging Face tokenizer.json pre_tokenizers); a family with several runs
 * them in turn, each splitting the pieces left by the one before. */
#include <string.h>

#include "tokenizer-impl.h"

/* GPT-2 maps the 188 printable bytes to themselves and the other 68
 * (0-32, 127-160, 173) to U+0100.. in byte order, so every byte string is
 * printable text. */
uint32_t tok_byte_to_cp(uint8_t b) {
    if (b <= 32) return 256u + b;
    if (b >= 127 && b <= 160) return 162u + b;
    if (b == 173) return 323;
    return b;
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp >= 256 && cp <= 288) return (int)(cp - 256);
    if (cp >= 289 && cp <= 322) return (int)(cp - 162);
    if (cp == 323) return 173;
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 255 && cp != 173)) return (int)cp;
    return -1;
}

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

static const char *const re_gpt2[] = {RE_GPT2, NULL};
static const char *const re_llama3[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_qwen2[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
/* StarCoder family: single digits first, then GPT-2. */
static const char *const re_starcoder[] = {"\\p{N}", RE_GPT2, NULL};
static const char *const re_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]",
                                        NULL};
static const char *const re_deepseek_coder[] = {
    "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+", /* CJK, Hangul */
    "\\p{N}", NULL};
/* Cased letters (Lu, Ll, Lt) spelled out as ranges, as the published
 * pattern does (\x{} where NFC would change the character), then ASCII and
 * full-width punctuation. */
static const char *const re_deepseek_llm[] = {
    "[\\r\\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
    NULL};
static const char *const re_deepseek_v3[] = {
    "\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
/* Mistral's tekken: runs of capitals then lower case, spelled with
 * lookahead since the class needs letters that are not a-z / A-Z. */
static const char *const re_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
    "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_bloom[] = {
    " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+",
    NULL};
static const char *const re_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+",
                                         "[0-9][0-9][0-9]", NULL};

typedef struct pre_family {
    const char *names; /* space separated, with a space at both ends */
    const char *const *regexes;
    bool ignore_merges;
} pre_family;

static const pre_family families[] = {
    {" default ", re_default, false},
    {" gpt-2 gpt2 mpt olmo jais trillion ", re_gpt2, false},
    {" llama3 llama-v3 llama-bpe dbrx smaug-bpe falcon3 chatglm-bpe ", re_llama3, true},
    {" qwen2 deepseek-r1-qwen stablelm2 hunyuan megrez ", re_qwen2, false},
    {" smollm starcoder refact command-r codeshell exaone minerva-7b ", re_starcoder, false},
    {" falcon ", re_falcon, false},
    {" deepseek-coder ", re_deepseek_coder, false},
    {" deepseek-llm ", re_deepseek_llm, false},
    {" deepseek-v3 ", re_deepseek_v3, false},
    {" tekken ", re_tekken, false},
    {" bloom poro-chat gpt3-finnish ", re_bloom, false},
};

const char *const *tok_pre_regexes(const char *pre, bool *ignore_merges, bool *known) {
    *ignore_merges = false;
    *known = !pre || !*pre; /* none given: an older file, the default split */
    if (!pre || !*pre || strchr(pre, ' ')) return re_default;
    size_t n = strlen(pre);
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        const char *hit = families[i].names;
        while ((hit = strstr(hit, pre)) != NULL) {
            if (hit[-1] == ' ' && hit[n] == ' ') {
                *ignore_merges = families[i].ignore_merges;
                *known = true;
                return families[i].regexes;
            }
            hit += n;
        }
    }
    return re_default;
}
