// OnceGate for Logic Apps (Consumption), in one deployment: the custom connector, a connection to this
// function app, and the sample workflow (docs/deploy.md, "Logic Apps in one step"). Power Automate
// connectors live in Dataverse, not in Azure: they are imported with `pac connector create`
// (connector/README.md).
//
// One copy of everything: the connector is the generated definition under connector/ (key or Entra
// variant, following authMode) with its host set to this app, and the workflow is
// connector/samples/workflow.json. loadJsonContent, not loadTextContent: a definition is about 140,000
// characters, over loadTextContent's limit of 131,072 and well under loadJsonContent's 1,048,576.
//
// The connection signs in with the app's default host function key, read by listKeys when the connection
// deploys: the key is never a parameter or an output. In entra mode there is no key to give: the
// connection is signed in once by a person, in the portal (docs/deploy.md).

@description('Region of the connector, the connection and the workflow.')
param location string

@description('Tags of every resource.')
param tags object

@description('Unique token of the deployment: part of every name.')
param resourceToken string

@description('Name of the OnceGate function app the connector calls.')
param functionAppName string

@allowed([
  'key'
  'entra'
])
@description('ONCEGATE_AUTH of the function app: key (the connector\'s function key variant) or entra (its Microsoft Entra ID variant).')
param authMode string

@description('The sample workflow\'s flow environment, sent with every claim: the environment name.')
param environmentName string

@description('Entra mode: application (client) ID of the OnceGate API app registration; the connection asks for a token for api://<this ID>.')
param entraClientId string

@description('Entra mode: application (client) ID of the connector\'s app registration, the one people sign the connection in with.')
param connectorClientId string

@secure()
@description('Entra mode: a client secret of the connector\'s app registration.')
param connectorClientSecret string

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: functionAppName
}

var functionAppHost = functionApp.properties.defaultHostName
var tenantId = tenant().tenantId
var definition = authMode == 'entra'
  ? loadJsonContent('../../connector/entra/apiDefinition.swagger.json')
  : loadJsonContent('../../connector/apiDefinition.swagger.json')
// The connection parameter that carries each definition's security, named as the connector platform
// names it: api_key for the key variant's apiKey scheme (the x-functions-key header), token for OAuth.
var keyConnectionParameters = {
  api_key: {
    type: 'securestring'
  }
}
var entraConnectionParameters = {
  token: {
    type: 'oauthSetting'
    oAuthSettings: {
      identityProvider: 'aad'
      // fail() only in entra mode: ARM may evaluate the variable whichever mode deploys.
      clientId: authMode == 'entra' && (empty(connectorClientId) || empty(connectorClientSecret))
        ? fail('Logic Apps in entra mode need the connector\'s app registration: logicAppsConnectorClientId and logicAppsConnectorClientSecret (docs/deploy.md, "Logic Apps in one step").')
        : connectorClientId
      clientSecret: connectorClientSecret
      scopes: []
      properties: {
        IsFirstParty: 'False'
      }
      customParameters: {
        loginUri: {
          value: 'https://login.microsoftonline.com'
        }
        tenantId: {
          value: tenantId
        }
        resourceUri: {
          value: 'api://${entraClientId}'
        }
      }
    }
  }
}

resource connector 'Microsoft.Web/customApis@2016-06-01' = {
  name: 'oncegate-${resourceToken}'
  location: location
  tags: tags
  properties: {
    displayName: definition.info.title
    description: definition.info.description
    apiType: 'Rest'
    brandColor: loadJsonContent('../../connector/apiProperties.json', '$.properties.iconBrandColor')
    capabilities: []
    backendService: {
      serviceUrl: 'https://${functionAppHost}'
    }
    swagger: union(definition, { host: functionAppHost })
    connectionParameters: authMode == 'entra' ? entraConnectionParameters : keyConnectionParameters
  }
}

resource connection 'Microsoft.Web/connections@2016-06-01' = {
  name: 'oncegate-${resourceToken}'
  location: location
  tags: tags
  properties: {
    displayName: 'OnceGate at ${functionAppHost}'
    api: {
      id: connector.id
    }
    // Only the chosen branch is evaluated (ARM's if()): in entra mode no key is read.
    parameterValues: authMode == 'entra'
      ? {}
      : {
          api_key: listKeys('${functionApp.id}/host/default', '2024-04-01').functionKeys.default
        }
  }
}

// The workflow's own parameters: what its definition declares, and nothing else.
var workflowParameters = {
  '$connections': {
    value: {
      oncegate: {
        connectionId: connection.id
        connectionName: connection.name
        id: connector.id
      }
    }
  }
  environmentName: {
    value: environmentName
  }
}

resource workflow 'Microsoft.Logic/workflows@2019-05-01' = {
  name: 'logic-oncegate-sample-${resourceToken}'
  location: location
  tags: tags
  properties: {
    state: 'Enabled'
    definition: loadJsonContent('../../connector/samples/workflow.json', '$.definition')
    parameters: workflowParameters
  }
}

@description('Name of the sample workflow: its trigger\'s URL is read with listCallbackUrl (docs/deploy.md), never output here.')
output workflowName string = workflow.name

@description('Name of the custom connector (Microsoft.Web/customApis) and of its connection (Microsoft.Web/connections).')
output connectorName string = connector.name
