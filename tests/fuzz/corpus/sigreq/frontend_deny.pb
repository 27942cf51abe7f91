
abcjwt"bad token(