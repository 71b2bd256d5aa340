"""Secrets redacted on the way in (docs/traces.md, "Secrets"): a key of each common provider,
written as it really looks, never survives; what is not a secret stays readable."""

import pytest

from traces.redact import redact, redact_value

# Real-looking credentials, assembled so no scanner mistakes this file for a leak.
SECRETS = {
    "openai project key": "sk-proj-" + "Tq8zK3mV9xL2pW7nR4bY6cJ1hF5dG0sAeU",
    "openai legacy key": "sk-" + "4fJ9kL2mN8pQ1rS6tU3vW0xY5zA7bC9dE2fG4hJ6",
    "anthropic key": "sk-ant-api03-" + "x7Yq2Lm9Pz4Rt8Vw1Nb6Kc3Hd5Jf0Sg-AbCdEfGhIjKlMnOpQr_st",
    "aws access key id": "AKIA" + "Z7Q4M2X9K3L8V5N6",
    "aws session key id": "ASIA" + "Q7RZ2M4K9X3L8V5N",
    "github classic token": "ghp_" + "R2d7Kx9LmQ4pZt8VwN3bYc6FhJ1sGe5TaU0o",
    "github fine-grained token": "github_pat_"
    + "11ABCDEFG0abcdefghijkl_MNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789AB",
    "gitlab token": "glpat-" + "x9Yz8Wv7Ut6Sr5Qp4On3",
    "slack bot token": "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack webhook": "https://hooks.slack.com/services/"
    + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "google api key": "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "google oauth token": "ya29." + "a0AfH6SMBx7Yq2Lm9Pz4Rt8Vw1Nb6Kc3Hd5Jf0Sg",
    "stripe live key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "stripe restricted key": "rk_live_" + "51H8xYzAbCdEfGhIjKlMnOp",
    "stripe webhook secret": "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "hugging face token": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "npm token": "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "jwt": "eyJhbGciOiJIUzI1NiJ9."
    + "eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
@pytest.mark.parametrize(
    "shape",
    [
        "export TOKEN_VALUE={}",
        "curl -s https://api.example.com -d key={}",
        '{{"credential": "{}"}}',
        "the value is {} and that is all",
    ],
)
def test_a_provider_credential_never_survives(name, shape):
    secret = SECRETS[name]
    text = shape.format(secret)
    assert secret not in redact(text)
    assert "[REDACTED:" in redact(text)


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE", "wJalrXUtnFEMI"),
        ('{"password": "correct horse battery"}', "correct horse"),
        ("PGPASSWORD=s3cr3t-pw psql -h db", "s3cr3t-pw"),
        ("mysql -u root -pHunter22 shop", "Hunter22"),
        ("--api-key 9f8e7d6c5b4a39281706 --verbose", "9f8e7d6c5b4a39281706"),
        ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "YWxhZGRpbjpvcGVuc2VzYW1l"),
        ("-H 'Authorization: token 0123456789abcdef0123'", "0123456789abcdef0123"),
        ("DATABASE_URL=postgres://app:Tr0ub4dor@db:5432/shop", "Tr0ub4dor"),
        ("git clone https://oauth2:abcdEFGH1234@gitlab.com/x/y.git", "abcdEFGH1234"),
        ("client_secret: 8Jk2LmN4pQ6rS8tU", "8Jk2LmN4pQ6rS8tU"),
        ("secretKey=AbC123xYz789", "AbC123xYz789"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXktdjEAAAAA",
        ),
        (
            "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B (output cut here",
            "MIIEvQIBADANBgkq",
        ),
    ],
)
def test_keyed_secrets_lose_their_value_and_keep_their_name(text, gone):
    assert gone not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "max_tokens=4096 tokenizer=fast",
        "password: str = Field(...)",
        "token = os.environ['GITHUB_TOKEN']",
        "api_key=${OPENAI_API_KEY}",
        "The token counts are low and the keys() call returned nothing",
        "uuid 0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e sha256:9f86d081884c7d659a2feaa0c55ad015",
        "task-skeleton is a folder; ask-me is a word",
    ],
)
def test_what_is_no_secret_stays_readable(text):
    assert redact(text) == text


def test_every_string_of_a_json_value_is_redacted_keys_included():
    key = SECRETS["github classic token"]
    value = {"args": ["--token", key], key: {"nested": f"Bearer {SECRETS['jwt']}"}, "n": 3}
    redacted = redact_value(value)
    assert key not in str(redacted) and SECRETS["jwt"] not in str(redacted)
    assert redacted["n"] == 3
