-- Runs once, on an empty data directory (/docker-entrypoint-initdb.d).
-- Each service owns its own database and a user that can touch only it.
CREATE DATABASE IF NOT EXISTS onceonly_order CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE DATABASE IF NOT EXISTS onceonly_payment CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;

CREATE USER IF NOT EXISTS 'order'@'%' IDENTIFIED BY 'order-pass';
CREATE USER IF NOT EXISTS 'payment'@'%' IDENTIFIED BY 'payment-pass';

GRANT ALL PRIVILEGES ON onceonly_order.* TO 'order'@'%';
GRANT ALL PRIVILEGES ON onceonly_payment.* TO 'payment'@'%';
FLUSH PRIVILEGES;
