"""What the tests share: fixture sources built from the vendored real speech (`sources`), the MELD-shaped
fixture (`meld`), synthetic tones (`synthetic_audio`) and the one-line-error checks (`user_errors`)."""
