-- The differential script: run by psql against PostgreSQL 15 and against engine-server;
-- the outputs must be equal line for line except the differences listed in
-- differential_test.go. Only SQL engine-server supports today (see docs/sql.md).
\set VERBOSITY sqlstate
\pset null '(null)'
-- Expressions without FROM, aliases, casts
SELECT 1 AS one, 2 + 3 * 4 AS arith, (2 + 3) * 4 AS paren, 7 / 2 AS div, -7 % 3 AS mod;
SELECT 'abc' AS t, 'a' || 'b' || 1 AS concat, length('héllo') AS len, upper('x'), lower('Y');
SELECT '42'::bigint + 1 AS big, 42::text AS txt, 'yes'::boolean AS b, 1::smallint AS small;
SELECT 9223372036854775807 AS max8, -9223372036854775807 - 1 AS min8, 2147483647 AS max4;
SELECT true AND NULL, false AND NULL, true OR NULL, NOT NULL::boolean, NULL IS NULL, 1 IS NOT NULL;
SELECT coalesce(NULL, 2, 3) AS c, NULL::bigint AS n, abs(-5);
SELECT 3 BETWEEN 1 AND 5 AS btw, 3 NOT BETWEEN 1 AND 2 AS nbtw, 2 IN (1, 2) AS inl, 2 NOT IN (1, 3) AS ninl;
SELECT 1 < 2, 2 <= 2, 3 > 4, 4 >= 5, 1 = 1, 1 <> 1, 'a' < 'b';
SELECT '\x00ff'::bytea AS hex, 'ab'::bytea AS esc;
-- Arithmetic errors
SELECT 2147483647 + 1;
SELECT -2147483648 - 1;
SELECT 9223372036854775807 + 1;
SELECT 4611686018427387904 * 2;
SELECT 32767::smallint + 1::smallint;
SELECT 1 / 0;
SELECT 1 % 0;
SELECT 'abc'::integer;
SELECT '99999999999'::integer;
SELECT 1 + 'x';
-- Unknown names and syntax
SELECT * FROM no_such_table;
SELECT no_such_column;
SELEC 1;
SELECT no_such_function(1);
-- DDL
CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL, branch integer NOT NULL, note bytea NOT NULL);
CREATE TABLE accounts (id bigint);
CREATE TABLE IF NOT EXISTS accounts (id bigint);
CREATE INDEX accounts_branch ON accounts (branch);
CREATE INDEX accounts_branch ON accounts (branch);
CREATE INDEX IF NOT EXISTS accounts_branch ON accounts (branch);
CREATE TABLE history (id bigint NOT NULL, delta bigint NOT NULL);
-- DML
INSERT INTO accounts VALUES (1, 100, 1, 'a'), (2, 200, 1, 'b'), (3, 300, 2, 'c');
INSERT INTO accounts (note, branch, balance, id) VALUES ('d', 2, 400, 4) RETURNING id, balance * 2 AS twice;
INSERT INTO accounts VALUES (5, 500, 3, '\x0102') RETURNING *;
INSERT INTO accounts VALUES (1, 0, 0, 'dup');
INSERT INTO accounts (id) VALUES (6, 7);
INSERT INTO accounts (no_such) VALUES (1);
INSERT INTO history SELECT g, g * 10 FROM generate_series(1, 5) AS g;
SELECT * FROM accounts ORDER BY id;
SELECT id, balance FROM accounts WHERE id = 3;
SELECT id FROM accounts WHERE id > 1 AND id <= 4 ORDER BY id DESC;
SELECT id FROM accounts WHERE id BETWEEN 2 AND 3 ORDER BY 1;
SELECT id FROM accounts WHERE branch = 1 OR balance >= 500 ORDER BY id;
SELECT id FROM accounts WHERE id IN (5, 1, 9) ORDER BY id;
SELECT id FROM accounts WHERE NOT (balance < 300) ORDER BY balance DESC LIMIT 2;
SELECT id FROM accounts ORDER BY id LIMIT 2 OFFSET 2;
SELECT a.id AS ident, a.balance / 100 AS hundreds FROM accounts a WHERE a.branch = 2 ORDER BY ident;
SELECT count(*) AS n, sum(balance) AS total, min(balance), max(id) FROM accounts;
SELECT count(*), sum(delta), min(delta), max(delta) FROM history WHERE id > 100;
SELECT sum(g), count(g) FROM generate_series(1, 100) g;
SELECT * FROM generate_series(10, 1, -3);
SELECT id, count(*) FROM accounts;
UPDATE accounts SET balance = balance + 1 WHERE id = 1;
UPDATE accounts SET balance = balance - 10, branch = branch + 1 WHERE branch = 2 RETURNING id, balance, branch;
UPDATE accounts SET balance = balance / 0 WHERE id = 1;
UPDATE accounts SET id = 2 WHERE id = 1;
DELETE FROM accounts WHERE id = 5;
DELETE FROM accounts WHERE id = 5;
DELETE FROM history WHERE id >= 4 RETURNING delta;
SELECT * FROM accounts ORDER BY balance;
-- Transaction blocks
BEGIN;
INSERT INTO history VALUES (100, 1);
SELECT count(*) FROM history;
ROLLBACK;
SELECT count(*) FROM history;
BEGIN;
INSERT INTO history VALUES (101, 1);
SELECT 1 / 0;
SELECT 1;
INSERT INTO history VALUES (102, 1);
COMMIT;
SELECT count(*) FROM history WHERE id > 100;
START TRANSACTION;
UPDATE accounts SET balance = 0 WHERE id = 2;
END;
SELECT balance FROM accounts WHERE id = 2;
COMMIT;
ROLLBACK;
-- Several statements in one Query: one implicit transaction
INSERT INTO history VALUES (200, 1) \; INSERT INTO history VALUES (201, 1) \; SELECT 1 / 0;
SELECT count(*) FROM history WHERE id >= 200;
INSERT INTO history VALUES (200, 1) \; INSERT INTO history VALUES (201, 1);
SELECT count(*) FROM history WHERE id >= 200;
-- Settings
SHOW DateStyle;
SHOW standard_conforming_strings;
SET application_name = 'differential';
SHOW application_name;
SELECT current_setting('application_name') AS app;
RESET application_name;
SHOW application_name;
SET no_such_setting = 1;
SHOW no_such_setting;
-- COPY FROM STDIN (text)
CREATE TABLE copied (id bigint PRIMARY KEY, n integer NOT NULL, raw bytea NOT NULL);
COPY copied FROM STDIN;
1	10	\\x00ff
2	20	plain
3	-30	tab\\011here
\.
BEGIN;
CREATE TABLE frozen (id bigint NOT NULL, raw bytea NOT NULL);
COPY frozen (raw, id) FROM STDIN WITH (FREEZE);
\\x01	4
\.
COMMIT;
SELECT * FROM frozen;
SELECT * FROM copied ORDER BY id;
COPY copied FROM STDIN;
5	50	ok
6	not-a-number	bad
\.
COPY copied FROM STDIN;
7	70
\.
COPY copied FROM STDIN;
1	1	dup
\.
SELECT count(*) FROM copied;
-- PostgreSQL's types, NULLs, unique keys, DROP and TRUNCATE
SHOW transaction_isolation;
CREATE TABLE typed (a smallint, b integer NOT NULL, c bigint, d boolean, e text, f varchar(3), g char(4), h bytea, i timestamp, j timestamptz);
INSERT INTO typed VALUES (1, 2, 3, true, 'x', 'abc', 'ab', '\x01ff', '2024-01-02 03:04:05.5', '2024-01-02 03:04:05+00');
INSERT INTO typed (b, e) VALUES (7, NULL), (8, 'eight');
INSERT INTO typed (a) VALUES (1);
INSERT INTO typed (b, f) VALUES (9, 'abcd');
INSERT INTO typed (b, f) VALUES (10, 'ab   ');
INSERT INTO typed (b, a) VALUES (11, 40000);
INSERT INTO typed (b, d) VALUES (12, 'maybe');
SELECT * FROM typed ORDER BY b;
SELECT b, g || '|' AS padded, f IS NULL AS f_null, coalesce(e, 'none') AS e FROM typed ORDER BY b;
SELECT count(*), count(a), count(e), min(i), max(j) FROM typed;
SELECT b FROM typed WHERE d IS NULL AND b > 7 ORDER BY b DESC;
UPDATE typed SET a = NULL, e = 'was one' WHERE a = 1 RETURNING b, a, e;
UPDATE typed SET b = NULL WHERE b = 7;
SELECT '2024-02-29 12:00:00'::timestamp AS ts, '2024-02-29 12:00:00+00'::timestamptz AS tstz, 'yes'::boolean AS yes;
CREATE TABLE keyed (id integer PRIMARY KEY, u bigint UNIQUE, n integer);
INSERT INTO keyed VALUES (1, 10, 0), (2, NULL, 0), (3, NULL, 0);
INSERT INTO keyed VALUES (4, 10, 0);
INSERT INTO keyed VALUES (NULL, 11, 0);
UPDATE keyed SET id = 1 WHERE id = 2;
UPDATE keyed SET n = n + 5 WHERE id BETWEEN 2 AND 3;
SELECT * FROM keyed ORDER BY id;
CREATE UNIQUE INDEX keyed_n ON keyed (n);
CREATE UNIQUE INDEX keyed_u ON keyed (u);
INSERT INTO keyed VALUES (5, 10, 1);
CREATE TABLE later (id integer NOT NULL, v integer);
INSERT INTO later SELECT g, g * 2 FROM generate_series(1, 50) g;
ALTER TABLE later ADD PRIMARY KEY (id);
INSERT INTO later VALUES (7, 0);
SELECT v FROM later WHERE id = 42;
ALTER TABLE typed ADD PRIMARY KEY (a);
BEGIN;
TRUNCATE later;
INSERT INTO later VALUES (7, 0);
SELECT count(*) FROM later;
ROLLBACK;
SELECT count(*) FROM later;
SELECT v FROM later WHERE id = 42;
BEGIN;
TRUNCATE later, keyed;
INSERT INTO later VALUES (7, 0);
COMMIT;
SELECT count(*) FROM later;
SELECT count(*) FROM keyed;
DROP TABLE later, nope;
DROP TABLE IF EXISTS later, nope;
SELECT count(*) FROM later;
DROP TABLE keyed;
DROP TABLE keyed;
-- Text and multi-column keys
CREATE TABLE city (name text PRIMARY KEY, region varchar(8), n integer, UNIQUE (region, n));
INSERT INTO city VALUES ('b', 'r1', 1), ('a', 'r1', 2), ('d', 'r2', 1), ('c', 'r1', NULL), ('e', 'r1', NULL), ('f', NULL, 1), ('g', NULL, 1);
INSERT INTO city VALUES ('b', 'r9', 9);
INSERT INTO city VALUES ('h', 'r1', 2);
INSERT INTO city VALUES (NULL, 'r3', 3);
UPDATE city SET n = 1 WHERE name = 'a';
SELECT * FROM city WHERE name = 'd';
SELECT name FROM city WHERE name >= 'b' AND name < 'd' ORDER BY name;
SELECT name, region FROM city WHERE name > 'e' ORDER BY name;
SELECT name FROM city WHERE name BETWEEN 'a' AND 'bz' ORDER BY name;
SELECT name FROM city WHERE region = 'r1' AND n > 1 AND n < 100 ORDER BY name;
SELECT name, n FROM city WHERE region = 'r1' AND n IS NULL ORDER BY name;
SELECT count(*) FROM city WHERE region = 'a-string-longer-than-eight';
SELECT name FROM city WHERE region BETWEEN 'r1' AND 'r2' AND n = 1 ORDER BY name;
CREATE INDEX ON city (n, name);
CREATE UNIQUE INDEX ON city (region, name);
CREATE UNIQUE INDEX city_n_key ON city (n);
SELECT name FROM city WHERE n = 1 AND name > 'b' ORDER BY name;
DELETE FROM city WHERE region = 'r1' AND n = 2 RETURNING name;
INSERT INTO city VALUES ('h', 'r1', 2);
CREATE TABLE pair (a integer, b text, v integer, PRIMARY KEY (a, b));
INSERT INTO pair VALUES (1, 'x', 0), (1, 'y', 0), (2, 'x', 0);
INSERT INTO pair VALUES (1, NULL, 0);
INSERT INTO pair VALUES (1, 'y', 5);
UPDATE pair SET v = v + 1 WHERE a = 1 AND b >= 'y' RETURNING *;
SELECT * FROM pair WHERE a = 1 ORDER BY b;
SELECT count(*) FROM pair WHERE a < 5000000000;
SELECT count(*) FROM pair WHERE a > 5000000000;
SELECT * FROM pair WHERE a = 5000000000;
CREATE TABLE dup (a integer, b varchar(4), c bigint);
INSERT INTO dup VALUES (1, 'x', 1), (1, 'x', 2), (1, 'x', NULL), (1, 'x', NULL);
ALTER TABLE dup ADD PRIMARY KEY (a, b);
ALTER TABLE dup ADD UNIQUE (a, b, c);
INSERT INTO dup VALUES (1, 'x', 2);
INSERT INTO dup VALUES (1, 'x', NULL);
SELECT count(*) FROM dup WHERE a = 1 AND b = 'x';
CREATE TABLE bad (a integer, PRIMARY KEY (a, a));
CREATE TABLE bad (a integer, UNIQUE (a, z));
DROP TABLE city, pair, dup;
