// The Key Vault holding OnceGate's HMAC key secret. Access is by Azure RBAC only (no access
// policies); the app reads the secret through a Key Vault reference with its user-assigned identity.
// The secret's value is written only when a new one is given (the first deployment): a redeploy
// leaves the secret, and every version of it, as it is, and does not even read it: after a rotation the
// first secret is retired and may be deleted (docs/deploy.md), and a redeploy must not stop at it. The
// app's reference names the version the first deployment wrote (keySecretUri), so a stray new version
// reaches no instance until the runbook moves the pin.
// A CanNotDelete lock keeps the vault, and the secret every claim id is made with, from being deleted
// (and a role assignment on the vault or a secret, until it is lifted: docs/deploy.md, "The delete locks");
// every read and write of the secret is logged to the Log Analytics workspace (AuditEvent).

@minLength(3)
@maxLength(24)
@description('Name of the Key Vault: 3-24 letters, digits and hyphens, unique in Azure.')
param name string

@description('Region of the Key Vault.')
param location string

@description('Tags of the Key Vault.')
param tags object

@description('Name of the secret holding ONCEGATE_KEY_SECRET.')
#disable-next-line secure-secrets-in-params // the secret's name, not its value
param keySecretName string

@secure()
@description('A new value for the secret, at least 32 characters, written as its latest version. Empty: the secret is not written, and the one in the vault stays.')
param newKeySecret string = ''

@description('A CanNotDelete lock on the vault.')
param deleteLock bool

@description('Resource ID of the Log Analytics workspace the vault\'s AuditEvent logs go to.')
param logAnalyticsWorkspaceId string

@description('Purge protection; irreversible once on.')
param enablePurgeProtection bool

@minValue(7)
@maxValue(90)
@description('Days a deleted vault or secret stays recoverable.')
param softDeleteRetentionInDays int

resource keyVault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: softDeleteRetentionInDays
    // The service takes true or nothing: "the property does not accept false as its value".
    enablePurgeProtection: enablePurgeProtection ? true : null
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }
}

// Only when a value is given: a deployment that declares the secret writes the declared value (a new
// version), so a deployment without a value must not declare it at all.
var writesKeySecret = !empty(newKeySecret)

module keySecretEntry 'key-secret.bicep' = if (writesKeySecret) {
  name: 'key-secret'
  params: {
    vaultName: keyVault.name
    name: keySecretName
    value: newKeySecret
  }
}

// The version just written: the one the first deployment pins (ARM's if() evaluates the chosen branch
// alone, so a redeploy reads no output of the module it does not deploy).
var writtenUri = keySecretEntry.outputs.uriWithVersion
// A redeploy reads nothing of the secret, which may be retired and gone: the secret's address without a
// version (App Service's documented form, .../secrets/<name>/), used only by a function app that has no key secret setting yet (one deleted by hand and made
// again), where it names the secret's latest version (docs/deploy.md, "The pinned version").
var unreadUri = '${keyVault.properties.vaultUri}secrets/${keySecretName}/'

resource audit 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'oncegate-audit'
  scope: keyVault
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logs: [
      {
        category: 'AuditEvent'
        enabled: true
      }
    ]
  }
}

resource lock 'Microsoft.Authorization/locks@2020-05-01' = if (deleteLock) {
  name: 'oncegate-keep-key-secret'
  scope: keyVault
  properties: {
    level: 'CanNotDelete'
    notes: 'Holds the HMAC secret of every OnceGate claim id. Remove the lock before deleting (docs/deploy.md).'
  }
}

@description('Name of the Key Vault.')
output name string = keyVault.name

// The app's Key Vault reference pins this version on the first deployment; later ones keep the app's
// setting (app/api.bicep), and the rotation runbook moves it (docs/deploy.md).
@description('URI of the key secret: with the version this deployment wrote, else without a version (nothing of the secret is read).')
output keySecretUri string = writesKeySecret ? writtenUri : unreadUri
